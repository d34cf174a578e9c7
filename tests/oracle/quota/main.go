// Quota oracle: Kubernetes' own ResourceQuota admission, driven over JSON cases.
//
// Reads {"cases": [...]} on stdin and writes {"results": [...]} on stdout. Each case is what
// the webhook's Resource Quotas check predicts: pods (by group, with a count), the
// namespace's LimitRanges, the cluster's globalDefault PriorityClass name, and ResourceQuotas
// (spec.hard and status.used). For every pod the apiserver's own chain is applied, in its order:
//
//  1. decode: the v1 defaulting (k8s.io/kubernetes/pkg/apis/core/v1 defaults.go: requests
//     default from limits), via legacyscheme.Scheme.Default, and the conversion to the
//     internal type the admission chain works on;
//  2. LimitRanger (plugin/pkg/admission/limitranger: PodMutateLimitFunc) for every
//     LimitRange, itself v1-defaulted first (defaultRequest from default, default from max);
//  3. Priority admission (plugin/pkg/admission/priority): a pod without priorityClassName
//     gets the globalDefault PriorityClass's name. Emulated here (three lines, commented)
//     instead of wiring an informer for one field;
//  4. ResourceQuota admission: k8s.io/apiserver/pkg/admission/plugin/resourcequota.CheckRequest
//     with the core pod evaluator (pkg/quota/v1/evaluator/core, which uses component-helpers
//     PodRequests/PodLimits), one pod create after another, each seeing the status.used the
//     previous one left, exactly as admission updates it.
//
// A pod with "phase": "Succeeded" is not created but measured: its Usage (what the quota
// controller charges for a finished pod) is reported.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	rqadmission "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/utils/clock"
)

type group struct {
	Name  string          `json:"name"`
	Count int             `json:"count"`
	Pod   json.RawMessage `json:"pod"`
	// groups whose pods have all Succeeded before this group's pods are created (a JobSet
	// dependsOn "Complete" stage): their usage is recounted as the quota controller recounts a
	// finished pod (PodUsageFunc: count/pods only), then this group is admitted
	CompleteBefore []string `json:"completeBefore"`
}

type inCase struct {
	ID                   string            `json:"id"`
	Groups               []group           `json:"groups"`
	Quotas               []json.RawMessage `json:"quotas"`
	LimitRanges          []json.RawMessage `json:"limitRanges"`
	DefaultPriorityClass string            `json:"defaultPriorityClass"`
}

type podOut struct {
	Group        string            `json:"group"`
	Index        int               `json:"index"`
	Error        string            `json:"error,omitempty"`
	Usage        map[string]string `json:"usage"`
	Matches      map[string]bool   `json:"matches"`
	Constraints  map[string]string `json:"constraints"`
	PriorityName string            `json:"priorityClassName"`
}

type outCase struct {
	ID    string `json:"id"`
	Error string `json:"error,omitempty"`
	// the first pod create the apiserver refuses, if any ("group/index")
	Rejected string `json:"rejected,omitempty"`
	// one entry per group: its first pod, as measured
	Pods []podOut `json:"pods"`
	// status.used of every quota after the pods that were admitted
	Used map[string]map[string]string `json:"used"`
	// per quota and resource, the most status.used reached at any point
	Peak map[string]map[string]string `json:"peak"`
}

func dec(q resource.Quantity) string { return q.AsDec().String() }

func list(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = dec(v)
	}
	return out
}

// admitted returns the pod as the admission chain hands it to ResourceQuota.
func admitted(raw json.RawMessage, lrs []*corev1.LimitRange, defaultPC string) (*api.Pod, *corev1.Pod, error) {
	v1pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, v1pod); err != nil {
		return nil, nil, err
	}
	// 1. decode: v1 defaulting (requests from limits), then to the internal type
	legacyscheme.Scheme.Default(v1pod)
	pod := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(v1pod, pod, nil); err != nil {
		return nil, nil, err
	}
	// 2. LimitRanger, every LimitRange of the namespace in the given order
	for _, lr := range lrs {
		if err := limitranger.PodMutateLimitFunc(lr, pod); err != nil {
			return nil, nil, err
		}
	}
	// 3. Priority admission on create: no name → the globalDefault PriorityClass's name
	if pod.Spec.PriorityClassName == "" {
		pod.Spec.PriorityClassName = defaultPC
	}
	out := &corev1.Pod{}
	if err := legacyscheme.Scheme.Convert(pod, out, nil); err != nil {
		return nil, nil, err
	}
	return pod, out, nil
}

func run(c inCase) outCase {
	res := outCase{ID: c.ID, Used: map[string]map[string]string{}, Peak: map[string]map[string]string{}}
	var quotas []corev1.ResourceQuota
	peak := map[string]corev1.ResourceList{}
	track := func() {
		for _, q := range quotas {
			if peak[q.Name] == nil {
				peak[q.Name] = corev1.ResourceList{}
			}
			for k, v := range q.Status.Used {
				if old, ok := peak[q.Name][k]; !ok || v.Cmp(old) > 0 {
					peak[q.Name][k] = v.DeepCopy()
				}
			}
		}
	}
	lrs := []*corev1.LimitRange{}
	for _, raw := range c.LimitRanges {
		lr := &corev1.LimitRange{}
		if err := json.Unmarshal(raw, lr); err != nil {
			res.Error = err.Error()
			return res
		}
		legacyscheme.Scheme.Default(lr)
		lrs = append(lrs, lr)
	}
	for _, raw := range c.Quotas {
		q := corev1.ResourceQuota{}
		if err := json.Unmarshal(raw, &q); err != nil {
			res.Error = err.Error()
			return res
		}
		// what the quota controller writes before admission can use the quota
		q.Status.Hard = q.Spec.Hard.DeepCopy()
		if q.Status.Used == nil {
			q.Status.Used = corev1.ResourceList{}
		}
		for k := range q.Status.Hard {
			if _, ok := q.Status.Used[k]; !ok {
				q.Status.Used[k] = resource.MustParse("0")
			}
		}
		quotas = append(quotas, q)
	}
	track()
	evaluator := core.NewPodEvaluator(nil, clock.RealClock{})
	admittedPods := map[string][]*corev1.Pod{}
	completed := map[string]bool{}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}

	for _, g := range c.Groups {
		for _, done := range g.CompleteBefore {
			if completed[done] {
				continue
			}
			completed[done] = true
			for _, p := range admittedPods[done] {
				finished := p.DeepCopy()
				finished.Status.Phase = corev1.PodSucceeded
				if err := recount(quotas, evaluator, p, finished); err != nil {
					res.Error = err.Error()
					return res
				}
			}
		}
		phase := struct {
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		}{}
		_ = json.Unmarshal(g.Pod, &phase)
		pod, v1pod, err := admitted(g.Pod, lrs, c.DefaultPriorityClass)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		usage, err := evaluator.Usage(v1pod)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		po := podOut{Group: g.Name, Usage: list(usage), Matches: map[string]bool{}, Constraints: map[string]string{},
			PriorityName: v1pod.Spec.PriorityClassName}
		for i := range quotas {
			m, err := evaluator.Matches(&quotas[i], v1pod)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			po.Matches[quotas[i].Name] = m
			if m {
				required := evaluator.MatchingResources(resourceNames(quotas[i].Status.Hard))
				if err := evaluator.Constraints(required, v1pod); err != nil {
					po.Constraints[quotas[i].Name] = err.Error()
				}
			}
		}
		if phase.Status.Phase != "" {
			po.Error = "measured only (phase " + phase.Status.Phase + ")"
			res.Pods = append(res.Pods, po)
			continue
		}
		for n := 0; n < g.Count; n++ {
			p := pod.DeepCopy()
			p.Name = fmt.Sprintf("%s-%d", g.Name, n)
			p.Namespace = "oracle"
			attrs := admission.NewAttributesRecord(p, nil, gvk, "oracle", p.Name, gvr, "", admission.Create, nil, false, &user.DefaultInfo{})
			out, err := rqadmission.CheckRequest(quotas, attrs, evaluator, nil)
			if err != nil {
				if n == 0 {
					po.Error = err.Error()
				}
				if res.Rejected == "" {
					res.Rejected = fmt.Sprintf("%s/%d: %v", g.Name, n, err)
				}
				break
			}
			quotas = out
			track()
			created := &corev1.Pod{}
			if err := legacyscheme.Scheme.Convert(p, created, nil); err != nil {
				res.Error = err.Error()
				return res
			}
			admittedPods[g.Name] = append(admittedPods[g.Name], created)
		}
		res.Pods = append(res.Pods, po)
		if res.Rejected != "" {
			break
		}
	}
	for _, q := range quotas {
		res.Used[q.Name] = list(q.Status.Used)
		res.Peak[q.Name] = list(peak[q.Name])
	}
	return res
}

// recount moves a pod's charge in every quota that matches it from `before` to `after`, as the
// quota controller's recalculation (generic.CalculateUsageStats over PodUsageFunc) does.
func recount(quotas []corev1.ResourceQuota, evaluator quotav1.Evaluator, before, after *corev1.Pod) error {
	was, err := evaluator.Usage(before)
	if err != nil {
		return err
	}
	now, err := evaluator.Usage(after)
	if err != nil {
		return err
	}
	for i := range quotas {
		m, err := evaluator.Matches(&quotas[i], before)
		if err != nil {
			return err
		}
		if !m {
			continue
		}
		hard := quotav1.ResourceNames(quotas[i].Status.Hard)
		used := quotav1.Subtract(quotas[i].Status.Used, quotav1.Mask(was, hard))
		quotas[i].Status.Used = quotav1.Add(used, quotav1.Mask(now, hard))
	}
	return nil
}

func resourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	return out
}

func main() {
	var in struct {
		Cases []inCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "quota-oracle: cannot read cases:", err)
		os.Exit(2)
	}
	out := struct {
		Results []outCase `json:"results"`
	}{}
	for _, c := range in.Cases {
		out.Results = append(out.Results, run(c))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "quota-oracle:", err)
		os.Exit(2)
	}
}
