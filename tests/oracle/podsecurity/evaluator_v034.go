//go:build psa_v034

// The evaluator constructor of k8s.io/pod-security-admission v0.34.x and older (build.sh picks
// this file with -tags psa_v034 when the module's minor is 34 or less).
//
// policy/registry.go NewEvaluator(checks); the opt-in user-namespace relaxation is the
// package-level switch policy/helpers.go RelaxPolicyForUserNamespacePods, which kube-apiserver
// sets from its UserNamespacesPodSecurityStandards feature gate
// (k8s.io/kubernetes v1.34 plugin/pkg/admission/security/podsecurity/admission.go InspectFeatureGates).
package main

import "k8s.io/pod-security-admission/policy"

func newEvaluator() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks())
}

func setRelaxUserNamespaces(relax bool) {
	policy.RelaxPolicyForUserNamespacePods(relax)
}
