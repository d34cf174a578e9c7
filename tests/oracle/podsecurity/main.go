// Pod Security oracle: k8s.io/pod-security-admission's own evaluator, driven over JSON cases.
//
// Reads {"cases": [...]} on stdin and writes {"results": [...]} on stdout, one result per case,
// in order. Two kinds of case:
//
//   - {"pod": {"metadata": {...}, "spec": {...}}, "level": "restricted", "version": "v1.24",
//     "relaxUserNamespaces": false}: the pod is decoded into corev1.Pod and judged by
//     policy.NewEvaluator(policy.DefaultChecks()).EvaluatePod(api.LevelVersion{...}, ...),
//     the evaluator kube-apiserver's PodSecurity plugin builds
//     (k8s.io/kubernetes plugin/pkg/admission/security/podsecurity/admission.go). The level
//     and version are parsed with api.ParseLevel / api.ParseVersion. relaxUserNamespaces sets
//     policy.RelaxPolicyForUserNamespacePods (the UserNamespacesPodSecurityStandards gate) on
//     v0.34.x and older; v0.35 removed the switch and the field is ignored there.
//     The result: allowed, the failing checks' forbidden reasons and details (in evaluation
//     order) and the aggregate message admission would return
//     (admission/admission.go EvaluatePod: `violates PodSecurity "<lv>": <detail>`).
//   - {"labels": {...}, "defaults": {"enforce": ..., "enforce-version": ..., ...}}: the labels
//     go through api.PolicyToEvaluate with the defaults as admission's
//     admissionapi.ToPolicy builds them; the result is the evaluated policy (enforce/audit/warn
//     as "<level>:<version>") and the number of label errors.
//
// `podsecurity-oracle --version` prints the k8s.io/pod-security-admission module version it
// was built against (from the binary's build info), e.g. "v0.37.2": the Python side judges as
// that library generation does.
//
// The evaluator's constructor changed in v0.35 (NewEvaluator gained an emulationVersion
// parameter, RelaxPolicyForUserNamespacePods was removed), so it lives in evaluator_v034.go /
// evaluator_v035.go; build.sh compiles exactly one of them by a build tag.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

type podCase struct {
	Metadata json.RawMessage `json:"metadata"`
	Spec     json.RawMessage `json:"spec"`
}

type testCase struct {
	Pod                 *podCase          `json:"pod,omitempty"`
	Level               string            `json:"level,omitempty"`
	Version             string            `json:"version,omitempty"`
	RelaxUserNamespaces bool              `json:"relaxUserNamespaces,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Defaults            map[string]string `json:"defaults,omitempty"`
}

type result struct {
	Error     string   `json:"error,omitempty"`
	Allowed   *bool    `json:"allowed,omitempty"`
	Reasons   []string `json:"reasons,omitempty"`
	Details   []string `json:"details,omitempty"`
	Message   string   `json:"message,omitempty"`
	Evaluated string   `json:"evaluated,omitempty"`
	Enforce   string   `json:"enforce,omitempty"`
	Audit     string   `json:"audit,omitempty"`
	Warn      string   `json:"warn,omitempty"`
	Errors    *int     `json:"errors,omitempty"`
}

const modulePath = "k8s.io/pod-security-admission"

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == modulePath {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(moduleVersion())
		return
	}
	var in struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity-oracle: bad input:", err)
		os.Exit(2)
	}
	evaluator, err := newEvaluator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity-oracle:", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(in.Cases))
	for _, c := range in.Cases {
		if c.Pod != nil {
			out = append(out, evaluate(evaluator, c))
		} else {
			out = append(out, labels(c))
		}
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(map[string]any{"results": out}); err != nil {
		fmt.Fprintln(os.Stderr, "podsecurity-oracle:", err)
		os.Exit(2)
	}
}

func evaluate(evaluator policy.Evaluator, c testCase) result {
	var pod corev1.Pod
	if len(c.Pod.Metadata) > 0 {
		if err := json.Unmarshal(c.Pod.Metadata, &pod.ObjectMeta); err != nil {
			return result{Error: "metadata: " + err.Error()}
		}
	}
	if len(c.Pod.Spec) > 0 {
		if err := json.Unmarshal(c.Pod.Spec, &pod.Spec); err != nil {
			return result{Error: "spec: " + err.Error()}
		}
	}
	level, err := api.ParseLevel(c.Level)
	if err != nil {
		return result{Error: "level: " + err.Error()}
	}
	version, err := api.ParseVersion(c.Version)
	if err != nil {
		return result{Error: "version: " + err.Error()}
	}
	setRelaxUserNamespaces(c.RelaxUserNamespaces)
	lv := api.LevelVersion{Level: level, Version: version}
	agg := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	allowed := agg.Allowed
	r := result{Allowed: &allowed, Reasons: agg.ForbiddenReasons, Details: agg.ForbiddenDetails, Evaluated: lv.String()}
	if !allowed {
		r.Message = fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), agg.ForbiddenDetail())
	}
	return r
}

func labels(c testCase) result {
	d := c.Defaults
	get := func(k, def string) string {
		if v, ok := d[k]; ok {
			return v
		}
		return def
	}
	var defaults api.Policy
	var err error
	// admission/api/helpers.go ToPolicy: the AdmissionConfiguration's defaults, parsed the same way
	if defaults.Enforce.Level, err = api.ParseLevel(get("enforce", "privileged")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	if defaults.Enforce.Version, err = api.ParseVersion(get("enforce-version", "latest")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	if defaults.Audit.Level, err = api.ParseLevel(get("audit", "privileged")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	if defaults.Audit.Version, err = api.ParseVersion(get("audit-version", "latest")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	if defaults.Warn.Level, err = api.ParseLevel(get("warn", "privileged")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	if defaults.Warn.Version, err = api.ParseVersion(get("warn-version", "latest")); err != nil {
		return result{Error: "defaults: " + err.Error()}
	}
	p, errs := api.PolicyToEvaluate(c.Labels, defaults)
	n := len(errs)
	return result{Enforce: p.Enforce.String(), Audit: p.Audit.String(), Warn: p.Warn.String(), Errors: &n}
}
