// DRA oracle: the real structured allocator (k8s.io/dynamic-resource-allocation, the k8s.io/kubernetes
// staging module at the e2e version) and the apiserver's DRA CEL environment, driven over JSON cases.
//
// Reads {"cases": [...], "selectors": [...]} on stdin and writes {"cases": [...], "selectors": [...]}
// on stdout.
//
//   - A case is one node, the ResourceSlices and DeviceClasses of the cluster, the devices already
//     allocated, and the claims of one pod. structured.NewAllocator (features: PrioritizedList, as
//     the scheduler's dynamicresources plugin enables with DRAPrioritizedList on) then Allocate(node,
//     claims): "ok" is whether it found an allocation, "error" the fatal error it returned (a CEL
//     runtime error, a missing class), exactly as the scheduler's Filter would see them.
//   - A selector is a CEL expression and one device (driver, attributes): cel.Cache.GetOrCompile and
//     DeviceMatches, the functions the allocator's selectorsMatch calls; "match" or "error".
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type allocated struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
}

type inCase struct {
	ID        string                       `json:"id"`
	Node      v1.Node                      `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []allocated                  `json:"allocated"`
}

type outCase struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type inSelector struct {
	Expression string                                                    `json:"expression"`
	Driver     string                                                    `json:"driver"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
}

type outSelector struct {
	Match bool   `json:"match"`
	Error string `json:"error,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func main() {
	var in struct {
		Cases     []inCase     `json:"cases"`
		Selectors []inSelector `json:"selectors"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "dra oracle: bad input:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	features := structured.Features{PrioritizedList: true}
	cache := cel.NewCache(100, cel.Features{})
	out := struct {
		Cases     []outCase     `json:"cases"`
		Selectors []outSelector `json:"selectors"`
	}{Cases: []outCase{}, Selectors: []outSelector{}}
	for _, c := range in.Cases {
		classes := classLister{}
		for _, cl := range c.Classes {
			classes[cl.Name] = cl
		}
		state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}
		for _, a := range c.Allocated {
			state.AllocatedDevices.Insert(structured.MakeDeviceID(a.Driver, a.Pool, a.Device))
		}
		res := outCase{ID: c.ID}
		alloc, err := structured.NewAllocator(ctx, features, state, classes, c.Slices, cache)
		if err == nil {
			var results []resourceapi.AllocationResult
			results, err = alloc.Allocate(ctx, &c.Node, c.Claims)
			res.OK = err == nil && len(results) == len(c.Claims)
		}
		if err != nil {
			res.Error = err.Error()
		}
		out.Cases = append(out.Cases, res)
	}
	for _, s := range in.Selectors {
		r := outSelector{}
		expr := cache.GetOrCompile(s.Expression)
		if expr.Error != nil {
			r.Error = "compile: " + expr.Error.Error()
		} else {
			m, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: s.Driver, Attributes: s.Attributes})
			r.Match = m
			if err != nil {
				r.Error = err.Error()
			}
		}
		out.Selectors = append(out.Selectors, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "dra oracle:", err)
		os.Exit(1)
	}
}
