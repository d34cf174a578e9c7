"""The group/versions of the projects the checks look for, named once for every check and model that asks
whether the cluster serves them (Kubeflow Trainer v2's TrainJob and runtimes; Kueue's v1beta2 API,
apis/kueue/v1beta2 in kubernetes-sigs/kueue)."""

from __future__ import annotations

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
