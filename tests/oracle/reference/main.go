// Image reference oracle: the kubelet's own parse of a container image.
//
// Reads a JSON array of strings on stdin and writes {"results": [...]} on stdout, one per
// string: whether k8s.io/kubernetes pkg/util/parsers.ParseImageName accepts it (the call
// pkg/kubelet/images/image_manager.go makes before every pull; an error there is the pod's
// InvalidImageName), and for an accepted one the domain, path, tag and digest that
// github.com/distribution/reference's ParseNormalizedNamed gives (the same call inside it),
// at the versions k8s.io/kubernetes pins.
package main

import (
	"encoding/json"
	"os"

	dockerref "github.com/distribution/reference"
	"k8s.io/kubernetes/pkg/util/parsers"
)

type result struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Domain string `json:"domain,omitempty"`
	Path   string `json:"path,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
}

func judge(image string) result {
	if _, _, _, err := parsers.ParseImageName(image); err != nil {
		return result{Error: err.Error()}
	}
	named, err := dockerref.ParseNormalizedNamed(image)
	if err != nil { // cannot happen: ParseImageName is this call
		return result{Error: err.Error()}
	}
	r := result{OK: true, Domain: dockerref.Domain(named), Path: dockerref.Path(named)}
	if t, ok := named.(dockerref.Tagged); ok {
		r.Tag = t.Tag()
	}
	if d, ok := named.(dockerref.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r
}

func main() {
	var images []string
	if err := json.NewDecoder(os.Stdin).Decode(&images); err != nil {
		os.Stderr.WriteString("reference-oracle: " + err.Error() + "\n")
		os.Exit(2)
	}
	out := struct {
		Results []result `json:"results"`
	}{Results: make([]result, 0, len(images))}
	for _, image := range images {
		out.Results = append(out.Results, judge(image))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
