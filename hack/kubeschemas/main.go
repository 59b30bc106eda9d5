// Command kubeschemas writes the OpenAPI v3 documents of Kubernetes
// releases, as the Kubernetes source ships them under api/openapi-spec/v3,
// into one zip archive per minor release for offline validation:
//
//	go run ./hack/kubeschemas -out schemas/releases v1.37.2 v1.36.3 ...
//
// Each release is read from the k8s.io/kubernetes module (go mod download,
// through the module proxy). Only the documents of group versions are kept
// (api__v1 and apis__<group>__<version>), each compressed on its own so
// that validation decompresses only the groups it uses. The archives are
// reproducible: entries sorted, times fixed. Run it with `make schemas`.
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// groupVersionDoc matches the documents of one group version.
var groupVersionDoc = regexp.MustCompile(`^(api__v1|apis__[a-z0-9.-]+__v[0-9a-z]+)_openapi\.json$`)

func main() {
	out := flag.String("out", "schemas/releases", "folder to write v<major>.<minor>.zip to")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: kubeschemas -out DIR vX.Y.Z ...")
		os.Exit(2)
	}
	for _, v := range flag.Args() {
		if err := write(*out, v); err != nil {
			fmt.Fprintf(os.Stderr, "kubeschemas: %s: %v\n", v, err)
			os.Exit(1)
		}
	}
}

func write(out, version string) error {
	m := regexp.MustCompile(`^v(1\.[0-9]+)\.[0-9]+$`).FindStringSubmatch(version)
	if m == nil {
		return fmt.Errorf("not a release version such as v1.37.2")
	}
	dir, err := download("k8s.io/kubernetes@" + version)
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "api", "openapi-spec", "v3")
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if groupVersionDoc.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no group version documents in %s", src)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	// kinds.json indexes the kinds of each group version, so that an
	// unknown kind or the replacement of a removed one is found without
	// decompressing a document.
	byGV := map[string]kinds{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		gv, ks, err := kindsOf(b)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		byGV[gv] = ks
		if err := add(zw, name, b); err != nil {
			return err
		}
	}
	index, err := json.MarshalIndent(byGV, "", " ")
	if err != nil {
		return err
	}
	if err := add(zw, "kinds.json", index); err != nil {
		return err
	}
	// The comment names the source, for the reader and for the tests.
	if err := zw.SetComment("k8s.io/kubernetes@" + version + " api/openapi-spec/v3"); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	path := filepath.Join(out, "v"+m[1]+".zip")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d group versions from %s, %d bytes\n", path, len(names), version, buf.Len())
	return nil
}

func add(zw *zip.Writer, name string, b []byte) error {
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate,
		Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// kinds are the kinds of one group version's resources, by scope.
type kinds struct {
	Namespaced []string `json:"namespaced"`
	Cluster    []string `json:"cluster"`
}

// kindsOf reads a group version's document: its group version (as
// apiVersion writes it) and the kinds of its resources, namespaced or
// not: a kind is namespaced when an operation on it is served under
// /namespaces/{namespace}/, as the API server serves only namespaced
// resources there.
func kindsOf(doc []byte) (string, kinds, error) {
	type operation struct {
		GVK *struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return "", kinds{}, err
	}
	// The group version is the one whose paths the document serves.
	var gv string
	for p := range d.Paths {
		parts := strings.Split(strings.Trim(p, "/"), "/")
		switch {
		case len(parts) >= 2 && parts[0] == "api":
			gv = parts[1]
		case len(parts) >= 3 && parts[0] == "apis":
			gv = parts[1] + "/" + parts[2]
		}
		if gv != "" {
			break
		}
	}
	if gv == "" {
		return "", kinds{}, fmt.Errorf("no paths")
	}
	namespaced, cluster := map[string]bool{}, map[string]bool{}
	for p, ops := range d.Paths {
		for _, raw := range ops {
			var op operation
			if json.Unmarshal(raw, &op) != nil || op.GVK == nil {
				continue // parameters, or an operation on no kind
			}
			k := op.GVK
			v := k.Version
			if k.Group != "" {
				v = k.Group + "/" + k.Version
			}
			if v != gv || strings.HasSuffix(k.Kind, "List") {
				continue
			}
			if strings.Contains(p, "/namespaces/{namespace}/") {
				namespaced[k.Kind] = true
			} else {
				cluster[k.Kind] = true
			}
		}
	}
	var ks kinds
	for k := range namespaced {
		ks.Namespaced = append(ks.Namespaced, k)
	}
	for k := range cluster {
		if !namespaced[k] { // listed across namespaces too
			ks.Cluster = append(ks.Cluster, k)
		}
	}
	sort.Strings(ks.Namespaced)
	sort.Strings(ks.Cluster)
	return gv, ks, nil
}

// download fetches a module through the Go toolchain and returns its folder.
func download(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", module, err, stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return info.Dir, nil
}
