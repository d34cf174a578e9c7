// kueue-oracle: Kueue v0.17.0's own scheduler cache, driven in process, answers how much a
// ClusterQueue could ever get (PotentialAvailable) and has left now (Available) per
// flavor/resource, for the trees tests/oracle/kueue/test_kueue_oracle.py generates.
//
// Input (stdin): a JSON list of cases
//
//	{"clusterQueues": [ClusterQueue...], "cohorts": [Cohort...],
//	 "usage": {"<cq>": {"<flavor>/<resource>": <int64 in Kueue units>}}}
//
// Output (stdout): one JSON object per case: {"<cq>": {"<flavor>/<resource>":
// {"potential": n, "available": n}}} for every active ClusterQueue of the snapshot.
// Kueue units: cpu in millicores, everything else in whole units (pkg/resources).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"
)

type oracleCase struct {
	ClusterQueues []kueue.ClusterQueue        `json:"clusterQueues"`
	Cohorts       []kueue.Cohort              `json:"cohorts"`
	Usage         map[string]map[string]int64 `json:"usage"`
}

type answer struct {
	Potential int64 `json:"potential"`
	Available int64 `json:"available"`
}

// emptyClient answers the cache's List calls (LocalQueues and Workloads of a new
// ClusterQueue) with nothing: the usage is added to the snapshot instead.
type emptyClient struct{ client.Client }

func (emptyClient) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func run(c oracleCase) (map[string]map[string]answer, error) {
	ctx := context.Background()
	cache := schdcache.New(emptyClient{})
	flavors := map[kueue.ResourceFlavorReference]bool{}
	for _, cq := range c.ClusterQueues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				flavors[f.Name] = true
			}
		}
	}
	for f := range flavors {
		rf := &kueue.ResourceFlavor{}
		rf.Name = string(f)
		cache.AddOrUpdateResourceFlavor(logr.Discard(), rf)
	}
	for i := range c.ClusterQueues {
		if err := cache.AddClusterQueue(ctx, &c.ClusterQueues[i]); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", c.ClusterQueues[i].Name, err)
		}
	}
	for i := range c.Cohorts {
		if err := cache.AddOrUpdateCohort(&c.Cohorts[i]); err != nil {
			return nil, fmt.Errorf("Cohort %s: %w", c.Cohorts[i].Name, err)
		}
	}
	snap, err := cache.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for name, u := range c.Usage {
		cq := snap.ClusterQueue(kueue.ClusterQueueReference(name))
		if cq == nil {
			continue
		}
		q := resources.FlavorResourceQuantities{}
		for k, v := range u {
			f, r, _ := strings.Cut(k, "/")
			q[resources.FlavorResource{Flavor: kueue.ResourceFlavorReference(f), Resource: corev1ResourceName(r)}] = v
		}
		cq.AddUsage(workload.Usage{Quota: q})
	}
	out := map[string]map[string]answer{}
	for name, cq := range snap.ClusterQueues() {
		got := map[string]answer{}
		for fr := range cq.ResourceNode.Quotas {
			got[string(fr.Flavor)+"/"+string(fr.Resource)] = answer{cq.PotentialAvailable(fr), cq.Available(fr)}
		}
		out[string(name)] = got
	}
	return out, nil
}

func main() {
	var cases []oracleCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-oracle: reading cases:", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for i, c := range cases {
		got, err := run(c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kueue-oracle: case %d: %v\n", i, err)
			os.Exit(1)
		}
		if err := enc.Encode(got); err != nil {
			os.Exit(1)
		}
	}
}
