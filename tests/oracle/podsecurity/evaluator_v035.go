//go:build psa_v035

// The evaluator constructor of k8s.io/pod-security-admission v0.35 and newer (build.sh picks
// this file with -tags psa_v035 when the module's minor is 35 or more).
//
// policy/registry.go NewEvaluator(checks, emulationVersion): kube-apiserver passes its emulation
// version only when it differs from the binary's (k8s.io/kubernetes v1.35+
// plugin/pkg/admission/security/podsecurity/admission.go InspectEffectiveVersion), so nil here.
// RelaxPolicyForUserNamespacePods is gone (v0.35 policy/helpers.go): the relaxation is
// unconditional in the 1.35 versions of runAsNonRoot, runAsUser and procMount, and the
// case's relaxUserNamespaces has no effect.
package main

import "k8s.io/pod-security-admission/policy"

func newEvaluator() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
}

func setRelaxUserNamespaces(bool) {}
