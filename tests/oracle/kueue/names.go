package main

import corev1 "k8s.io/api/core/v1"

func corev1ResourceName(r string) corev1.ResourceName { return corev1.ResourceName(r) }
