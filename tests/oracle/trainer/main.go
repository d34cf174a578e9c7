// Command trainer-oracle renders TrainJobs the way Kubeflow Trainer v2.3.0 and JobSet v0.12.0 do,
// by calling their own code in process. It is the judge of tests/oracle/test_trainer_oracle.py and
// is built (once, cached outside the repository) by tests/oracle/trainer/build.sh.
//
// stdin:  {"cases": [{"name": "...", "trainJob": {...}, "runtime": {...}}]}
// stdout: {"cases": [{"name": "...", "error": "...", "objects": [...], "jobSet": {...}, "jobs": [...]}]}
//
// Per case:
//  1. the CRD schema defaults are applied to the TrainJob and the runtime, as the apiserver does
//     on create (k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting algorithm.go);
//  2. Trainer's runtime framework builds the objects: runtimecore.New over a controller-runtime
//     fake client holding the runtime, then Runtime.NewObjects (pkg/runtime/core/trainingruntime.go);
//  3. the JobSet Trainer built gets the JobSet CRD defaults and the JobSet webhook's defaults
//     (sigs.k8s.io/jobset pkg/webhooks/jobset_webhook.go Default: network), and JobSet's own
//     reconciler (pkg/controllers) creates its Jobs in a second fake client. dependsOn is removed
//     and the JobSet suspended for this step only, so that every Job is created in one pass
//     (dependsOn and startup order gate *when* Jobs are created, never what they contain); the
//     JobSet in the output keeps them.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetcontrollers "sigs.k8s.io/jobset/pkg/controllers"
	"sigs.k8s.io/yaml"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
)

//go:embed crds/*.yaml
var crdFS embed.FS

type caseIn struct {
	Name     string         `json:"name"`
	TrainJob map[string]any `json:"trainJob"`
	Runtime  map[string]any `json:"runtime"`
}

type jobOut struct {
	Name          string            `json:"name"`
	ReplicatedJob string            `json:"replicatedJob"`
	Parallelism   int32             `json:"parallelism"`
	Completions   int32             `json:"completions"`
	PodLabels     map[string]string `json:"podLabels,omitempty"`
	PodSpec       any               `json:"podSpec"`
}

type caseOut struct {
	Name    string   `json:"name"`
	Error   string   `json:"error,omitempty"`
	Objects []any    `json:"objects,omitempty"`
	JobSet  any      `json:"jobSet,omitempty"`
	Jobs    []jobOut `json:"jobs,omitempty"`
}

// schemas: kind → the openAPIV3Schema of its served storage version.
var schemas = map[string]map[string]any{}

func loadCRDs() error {
	entries, err := crdFS.ReadDir("crds")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := crdFS.ReadFile("crds/" + e.Name())
		if err != nil {
			return err
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		spec, _ := crd["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		kind, _ := names["kind"].(string)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if storage, _ := vm["storage"].(bool); !storage {
				continue
			}
			sch, _ := vm["schema"].(map[string]any)
			if s, ok := sch["openAPIV3Schema"].(map[string]any); ok {
				schemas[kind] = s
			}
		}
	}
	for _, k := range []string{"TrainJob", "ClusterTrainingRuntime", "TrainingRuntime", "JobSet"} {
		if schemas[k] == nil {
			return fmt.Errorf("no CRD schema for %s among the embedded CRDs", k)
		}
	}
	return nil
}

func deepCopyJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// applyDefaults sets the schema's defaults on x the way the apiserver's structural defaulting
// does (k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go): a missing
// property (or a null one that is not nullable) gets its default, then every value is visited
// with its property, items or additionalProperties schema.
func applyDefaults(x any, s map[string]any) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			pm, _ := p.(map[string]any)
			d, has := pm["default"]
			if !has {
				continue
			}
			v, exists := x[k]
			nullable, _ := pm["nullable"].(bool)
			if !exists || (v == nil && !nullable) {
				x[k] = deepCopyJSON(d)
			}
		}
		for k, v := range x {
			if p, ok := props[k].(map[string]any); ok {
				applyDefaults(v, p)
			} else if ap, ok := s["additionalProperties"].(map[string]any); ok {
				applyDefaults(v, ap)
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for _, v := range x {
			applyDefaults(v, items)
		}
	}
}

func convert(in any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func newScheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = trainer.AddToScheme(s)
	_ = jobsetv1alpha2.AddToScheme(s)
	return s
}

// noIndexer: Trainer's runtimes register field indexes used by its controllers' lists only.
type noIndexer struct{}

func (noIndexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// recordingIndexer collects JobSet's indexes to register them on the fake client.
type recordingIndexer struct{ b *fake.ClientBuilder }

func (r recordingIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	r.b.WithIndex(obj, field, fn)
	return nil
}

func meta(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func runCase(ctx context.Context, c caseIn) (out caseOut) {
	out.Name = c.Name
	defer func() {
		if r := recover(); r != nil {
			out.Error = fmt.Sprintf("panic: %v", r)
		}
	}()
	tj := deepCopyJSON(c.TrainJob).(map[string]any)
	rt := deepCopyJSON(c.Runtime).(map[string]any)
	tjMeta := meta(tj)
	if tjMeta["namespace"] == nil {
		tjMeta["namespace"] = "default"
	}
	if tjMeta["uid"] == nil {
		tjMeta["uid"] = "00000000-0000-0000-0000-000000000001"
	}
	rtKind, _ := rt["kind"].(string)
	if rtKind == "TrainingRuntime" && meta(rt)["namespace"] == nil {
		meta(rt)["namespace"] = tjMeta["namespace"]
	}
	applyDefaults(tj, schemas["TrainJob"])
	applyDefaults(rt, schemas[rtKind])

	scheme := newScheme()
	var trainJob trainer.TrainJob
	if err := convert(tj, &trainJob); err != nil {
		out.Error = "TrainJob: " + err.Error()
		return
	}
	var rtObj client.Object
	switch rtKind {
	case "ClusterTrainingRuntime":
		rtObj = &trainer.ClusterTrainingRuntime{}
	case "TrainingRuntime":
		rtObj = &trainer.TrainingRuntime{}
	default:
		out.Error = "unsupported runtime kind " + rtKind
		return
	}
	if err := convert(rt, rtObj); err != nil {
		out.Error = "runtime: " + err.Error()
		return
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rtObj).Build()
	cfg := &configapi.Configuration{}
	scheme.Default(cfg)
	configapi.SetDefaults_Configuration(cfg)
	runtimes, err := runtimecore.New(ctx, cl, noIndexer{}, cfg)
	if err != nil {
		out.Error = "runtimecore.New: " + err.Error()
		return
	}
	key := fmt.Sprintf("%s.%s", ptr.Deref(trainJob.Spec.RuntimeRef.Kind, ""), ptr.Deref(trainJob.Spec.RuntimeRef.APIGroup, ""))
	rtm, ok := runtimes[key]
	if !ok {
		out.Error = "no runtime registered for " + key
		return
	}
	objs, err := rtm.NewObjects(ctx, &trainJob)
	if err != nil {
		out.Error = "NewObjects: " + err.Error()
		return
	}
	var jobSet map[string]any
	for _, o := range objs {
		var m map[string]any
		if err := convert(o, &m); err != nil {
			out.Error = "marshal: " + err.Error()
			return
		}
		if m["kind"] == "JobSet" {
			jobSet = m
		}
		// Secrets carry generated keys: only their identity is reported.
		if m["kind"] == "Secret" {
			m = map[string]any{"apiVersion": m["apiVersion"], "kind": m["kind"], "metadata": map[string]any{"name": meta(m)["name"]}}
		}
		out.Objects = append(out.Objects, m)
	}
	// What Trainer applied through its client besides NewObjects' result: the runtime snapshot
	// ConfigMap (pkg/runtime/core/snapshot.go). Only its identity is reported.
	var applied corev1.ConfigMapList
	if err := cl.List(ctx, &applied); err != nil {
		out.Error = "listing applied ConfigMaps: " + err.Error()
		return
	}
	for _, cm := range applied.Items {
		out.Objects = append(out.Objects, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": cm.Name}})
	}
	if jobSet == nil {
		out.Error = "Trainer built no JobSet"
		return
	}
	applyDefaults(jobSet, schemas["JobSet"])
	out.JobSet = deepCopyJSON(jobSet)
	jobs, err := jobSetJobs(ctx, jobSet)
	if err != nil {
		out.Error = "JobSet reconcile: " + err.Error()
		return
	}
	out.Jobs = jobs
	return
}

// jobSetJobs runs JobSet's reconciler on the JobSet and returns the Jobs it creates.
func jobSetJobs(ctx context.Context, jobSet map[string]any) ([]jobOut, error) {
	var js jobsetv1alpha2.JobSet
	if err := convert(jobSet, &js); err != nil {
		return nil, err
	}
	js.UID = types.UID("00000000-0000-0000-0000-000000000002")
	// sigs.k8s.io/jobset pkg/webhooks/jobset_webhook.go Default (the fields the reconciler reads)
	if js.Spec.Network == nil {
		js.Spec.Network = &jobsetv1alpha2.Network{}
	}
	if js.Spec.Network.EnableDNSHostnames == nil {
		js.Spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if js.Spec.Network.PublishNotReadyAddresses == nil {
		js.Spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	if js.Spec.SuccessPolicy == nil {
		js.Spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}
	}
	if js.Spec.StartupPolicy == nil {
		js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}
	}
	for i, p := range js.Spec.VolumeClaimPolicies {
		if p.RetentionPolicy == nil {
			js.Spec.VolumeClaimPolicies[i].RetentionPolicy = &jobsetv1alpha2.VolumeRetentionPolicy{
				WhenDeleted: ptr.To(jobsetv1alpha2.RetentionPolicyDelete),
			}
		}
	}
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].DependsOn = nil
	}
	js.Spec.Suspend = ptr.To(true)

	scheme := newScheme()
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&jobsetv1alpha2.JobSet{}).WithObjects(&js)
	if err := jobsetcontrollers.SetupJobSetIndexes(ctx, recordingIndexer{b}); err != nil {
		return nil, err
	}
	cl := b.Build()
	rec := events.NewFakeRecorder(10000)
	r := jobsetcontrollers.NewJobSetReconciler(cl, scheme, rec)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: js.Namespace, Name: js.Name}}); err != nil {
		return nil, err
	}
	var list batchv1.JobList
	if err := cl.List(ctx, &list, client.InNamespace(js.Namespace)); err != nil {
		return nil, err
	}
	var out []jobOut
	for _, j := range list.Items {
		var ps any
		if err := convert(j.Spec.Template.Spec, &ps); err != nil {
			return nil, err
		}
		out = append(out, jobOut{
			Name:          j.Name,
			ReplicatedJob: j.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
			Parallelism:   ptr.Deref(j.Spec.Parallelism, 1),
			Completions:   ptr.Deref(j.Spec.Completions, 1),
			PodLabels:     j.Spec.Template.Labels,
			PodSpec:       ps,
		})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out, nil
}

func main() {
	if err := loadCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, "trainer-oracle:", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("trainer-oracle: Kubeflow Trainer v2.3.0, JobSet v0.12.0")
		return
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainer-oracle:", err)
		os.Exit(1)
	}
	var in struct {
		Cases []caseIn `json:"cases"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		fmt.Fprintln(os.Stderr, "trainer-oracle: input:", err)
		os.Exit(1)
	}
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	var result struct {
		Cases []caseOut `json:"cases"`
	}
	for _, c := range in.Cases {
		result.Cases = append(result.Cases, runCase(ctx, c))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(result); err != nil {
		fmt.Fprintln(os.Stderr, "trainer-oracle:", err)
		os.Exit(1)
	}
}
