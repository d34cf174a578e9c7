// The storage oracle: which PersistentVolume Kubernetes binds a claim to, and which StorageClass
// is the default, computed by Kubernetes' own code (k8s.io/kubernetes at the e2e version).
//
// One JSON case per stdin line, one JSON answer per stdout line:
//
//	{"op":"immediate","claim":PVC,"volumes":[PV...]} -> {"picks":["pv-a","pv-b"]}
//	    the PV controller's choice (pkg/controller/volume/persistentvolume/index.go findByClaim:
//	    the PVs grouped by their access modes, the groups that contain the claim's modes tried
//	    fewest modes first, volume.FindMatchingVolume in each, delayBinding=false). Groups with the
//	    same number of modes come in map order upstream, so every group of the first level that
//	    matches is a possible answer: all of them are returned (empty: no match).
//	{"op":"delayed","claim":PVC,"volumes":[PV...],"node":Node} -> {"picks":["pv-a"]}
//	    the scheduler's choice on one node (pkg/scheduler/framework/plugins/volumebinding/binder.go
//	    findMatchingVolumes: the PVs of the claim's class, FindMatchingVolume with the node).
//	{"op":"default","classes":[StorageClass...]} -> {"default":"name"}
//	    pkg/volume/util/storageclass.go GetDefaultClass over a lister of the classes.
//
// The index.go grouping is a copy of its unexported allPossibleMatchingAccessModes and findByClaim
// (the functions are private to their package); everything else is called, not copied.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/volume"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/volume/util"
)

type request struct {
	Op      string                    `json:"op"`
	Claim   *v1.PersistentVolumeClaim `json:"claim"`
	Volumes []*v1.PersistentVolume    `json:"volumes"`
	Node    *v1.Node                  `json:"node"`
	Classes []*storagev1.StorageClass `json:"classes"`
}

type answer struct {
	Picks   []string `json:"picks"`
	Default *string  `json:"default,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func immediate(claim *v1.PersistentVolumeClaim, volumes []*v1.PersistentVolume) ([]string, error) {
	groups := map[string][]*v1.PersistentVolume{}
	for _, pv := range volumes {
		key := v1helper.GetAccessModesAsString(pv.Spec.AccessModes)
		groups[key] = append(groups[key], pv)
	}
	type set struct {
		key   string
		modes []v1.PersistentVolumeAccessMode
	}
	var sets []set
	for key := range groups {
		modes := v1helper.GetAccessModesFromString(key)
		if util.ContainsAllAccessModes(modes, claim.Spec.AccessModes) {
			sets = append(sets, set{key, modes})
		}
	}
	sort.Slice(sets, func(i, j int) bool { return len(sets[i].modes) < len(sets[j].modes) })
	picks := []string{}
	level := -1
	for _, s := range sets {
		if level >= 0 && len(s.modes) != level {
			break
		}
		best, err := volume.FindMatchingVolume(claim, groups[s.key], nil, nil, false, true)
		if err != nil {
			return nil, err
		}
		if best != nil {
			picks = append(picks, best.Name)
			level = len(s.modes)
		}
	}
	sort.Strings(picks)
	return picks, nil
}

func delayed(claim *v1.PersistentVolumeClaim, volumes []*v1.PersistentVolume, node *v1.Node) ([]string, error) {
	class := volume.GetPersistentVolumeClaimClass(claim)
	var ofClass []*v1.PersistentVolume
	for _, pv := range volumes {
		if volume.GetPersistentVolumeClass(pv) == class {
			ofClass = append(ofClass, pv)
		}
	}
	best, err := volume.FindMatchingVolume(claim, ofClass, node, nil, true, true)
	if err != nil || best == nil {
		return []string{}, err
	}
	return []string{best.Name}, nil
}

func defaultClass(classes []*storagev1.StorageClass) (string, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range classes {
		if err := indexer.Add(c); err != nil {
			return "", err
		}
	}
	def, err := util.GetDefaultClass(storagelisters.NewStorageClassLister(indexer))
	if err != nil || def == nil {
		return "", err
	}
	return def.Name, nil
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var ans answer
		var err error
		if err = json.Unmarshal(in.Bytes(), &req); err == nil {
			switch req.Op {
			case "immediate":
				ans.Picks, err = immediate(req.Claim, req.Volumes)
			case "delayed":
				ans.Picks, err = delayed(req.Claim, req.Volumes, req.Node)
			case "default":
				var name string
				name, err = defaultClass(req.Classes)
				ans.Default = &name
			default:
				err = fmt.Errorf("unknown op %q", req.Op)
			}
		}
		if err != nil {
			ans.Error = err.Error()
		}
		if err := enc.Encode(ans); err != nil {
			panic(err)
		}
		out.Flush()
	}
}
