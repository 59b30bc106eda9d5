// Package releases holds the OpenAPI v3 documents of the Kubernetes
// releases gantry validates against offline, one archive per minor release
// (made by `make schemas` from the k8s.io/kubernetes module), and what each
// release no longer serves. A document is decompressed when an object of
// its group version is first validated, never at start-up.
package releases

import (
	"archive/zip"
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Newest and Oldest are the newest and the oldest release embedded (a
// test checks them against the archives).
const (
	Newest = "1.37"
	Oldest = "1.33"
)

//go:embed v*.zip
var archives embed.FS

// Release is one Kubernetes minor release's built-in API.
type Release struct {
	// Version is the minor release, such as 1.37.
	Version string
	// Source is the module the documents come from, such as
	// k8s.io/kubernetes@v1.37.2.
	Source string
	docs   map[schema.GroupVersion]*zip.File
	index  *zip.File

	kindsOnce  sync.Once
	kinds      map[schema.GroupVersion][]string
	namespaced map[schema.GroupVersionKind]bool
	kindsErr   error
}

var (
	loadOnce sync.Once
	loaded   []*Release // newest first
	loadErr  error
)

// All returns the embedded releases, newest first.
func All() ([]*Release, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

// Versions lists the embedded minor releases, newest first.
func Versions() []string {
	all, _ := All()
	var vs []string
	for _, r := range all {
		vs = append(vs, r.Version)
	}
	return vs
}

// Get returns the release of version, written 1.37 or v1.37 (a patch
// release, 1.37.2, is read as its minor release).
func Get(version string) (*Release, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	want := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if parts := strings.Split(want, "."); len(parts) == 3 {
		want = parts[0] + "." + parts[1]
	}
	for _, r := range all {
		if r.Version == want {
			return r, nil
		}
	}
	return nil, fmt.Errorf("gantry does not know Kubernetes %s offline; it knows %s", version, strings.Join(Versions(), ", "))
}

var docName = regexp.MustCompile(`^(?:api__(v1)|apis__([a-z0-9.-]+)__(v[0-9a-z]+))_openapi\.json$`)

func load() ([]*Release, error) {
	entries, err := archives.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var all []*Release
	for _, e := range entries {
		b, err := archives.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		r := &Release{Version: strings.TrimSuffix(strings.TrimPrefix(e.Name(), "v"), ".zip"),
			docs: map[schema.GroupVersion]*zip.File{}}
		r.Source, _, _ = strings.Cut(zr.Comment, " ")
		for _, f := range zr.File {
			if f.Name == "kinds.json" {
				r.index = f
				continue
			}
			m := docName.FindStringSubmatch(f.Name)
			if m == nil {
				continue
			}
			if m[1] != "" {
				r.docs[schema.GroupVersion{Version: m[1]}] = f
			} else {
				r.docs[schema.GroupVersion{Group: m[2], Version: m[3]}] = f
			}
		}
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b *Release) int { return minor(b.Version) - minor(a.Version) })
	return all, nil
}

// minor is 37 of 1.37.
func minor(version string) int {
	_, m, _ := strings.Cut(version, ".")
	n, _ := strconv.Atoi(m)
	return n
}

// Serves reports whether the release serves the group version.
func (r *Release) Serves(gv schema.GroupVersion) bool {
	_, ok := r.docs[gv]
	return ok
}

// GroupVersions lists what the release serves.
func (r *Release) GroupVersions() []schema.GroupVersion {
	var gvs []schema.GroupVersion
	for gv := range r.docs {
		gvs = append(gvs, gv)
	}
	slices.SortFunc(gvs, func(a, b schema.GroupVersion) int { return strings.Compare(a.String(), b.String()) })
	return gvs
}

// OpenAPIV3 returns the release's OpenAPI v3 document of gv, as the API
// server of that release publishes it at /openapi/v3.
func (r *Release) OpenAPIV3(gv schema.GroupVersion) ([]byte, error) {
	f, ok := r.docs[gv]
	if !ok {
		return nil, fmt.Errorf("%s is not served by Kubernetes %s", gv, r.Version)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Kinds lists the kinds of the resources gv serves in the release, empty
// when it does not serve gv.
func (r *Release) Kinds(gv schema.GroupVersion) ([]string, error) {
	if err := r.loadKinds(); err != nil {
		return nil, err
	}
	return r.kinds[gv], nil
}

// Namespaced reports whether the release serves gvk in namespaces; false
// for a cluster-scoped kind and for one it does not serve.
func (r *Release) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	if err := r.loadKinds(); err != nil {
		return false, err
	}
	return r.namespaced[gvk], nil
}

// loadKinds reads the archive's index of kinds, once.
func (r *Release) loadKinds() error {
	r.kindsOnce.Do(func() {
		r.kinds = map[schema.GroupVersion][]string{}
		r.namespaced = map[schema.GroupVersionKind]bool{}
		if r.index == nil {
			r.kindsErr = fmt.Errorf("the archive of Kubernetes %s has no kinds.json", r.Version)
			return
		}
		rc, err := r.index.Open()
		if err != nil {
			r.kindsErr = err
			return
		}
		defer rc.Close()
		var byGV map[string]struct{ Namespaced, Cluster []string }
		if err := json.NewDecoder(rc).Decode(&byGV); err != nil {
			r.kindsErr = fmt.Errorf("kinds.json of Kubernetes %s: %w", r.Version, err)
			return
		}
		for gv, ks := range byGV {
			parsed, err := schema.ParseGroupVersion(gv)
			if err != nil {
				r.kindsErr = fmt.Errorf("kinds.json of Kubernetes %s: %w", r.Version, err)
				return
			}
			r.kinds[parsed] = append(slices.Clone(ks.Namespaced), ks.Cluster...)
			for _, k := range ks.Namespaced {
				r.namespaced[parsed.WithKind(k)] = true
			}
		}
	})
	return r.kindsErr
}

// ServesKind reports whether the release serves the kind in its group
// version.
func (r *Release) ServesKind(gvk schema.GroupVersionKind) (bool, error) {
	ks, err := r.Kinds(gvk.GroupVersion())
	return slices.Contains(ks, gvk.Kind), err
}
