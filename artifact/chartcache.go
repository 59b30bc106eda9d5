package artifact

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// chartCache keeps fetched charts in a folder: each .tgz once, by its
// digest (blobs/sha256/<hex>.tgz), and for each chart and version fetched
// an index entry (index/<hash of chart and version>.json) naming the
// digest, so that a run pinned to a version reads nothing from the
// network. Every file is written through an os.Root at the folder, to a
// temporary name renamed into place, so that a run never reads a file
// half written and no link in the folder leads a write out of it. What is
// read is checked against its digest.
type chartCache struct {
	root *os.Root
}

// cacheEntry is one index entry: a chart's version and its digest.
type cacheEntry struct {
	Ref      string `json:"ref"`
	Version  string `json:"version"`
	Digest   string `json:"digest"`
	Manifest string `json:"manifest,omitempty"`
	// VerifiedBy, when set, says its signature was checked when it was
	// fetched, and against what (verifyPolicy): a run that verifies
	// with another key or identity takes it as not verified.
	VerifiedBy string `json:"verifiedBy,omitempty"`
}

// maxIndexEntryBytes bounds an index entry read.
const maxIndexEntryBytes = 64 << 10

func openChartCache(dir string) (*chartCache, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chart-cache: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("chart-cache: %w", err)
	}
	for _, d := range []string{"blobs/sha256", "index"} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			root.Close()
			return nil, fmt.Errorf("chart-cache %s: %w", dir, err)
		}
	}
	return &chartCache{root: root}, nil
}

func (c *chartCache) close() { c.root.Close() }

func indexName(ref, version string) string {
	return "index/" + sha256Hex([]byte(ref+"\x00"+version)) + ".json"
}

// lookup returns the entry of ref whose version ok takes, the highest if
// several do; with verified, only an entry verified when fetched.
//
// policy, when set, is the verification a run asks for: only entries
// verified as it verifies are taken.
func (c *chartCache) lookup(ref string, ok func(version string) bool, policy string) *cacheEntry {
	entries, err := fs.ReadDir(c.root.FS(), "index")
	if err != nil {
		return nil
	}
	var best *cacheEntry
	var bestV *semver.Version
	for _, d := range entries {
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".json") {
			continue
		}
		e, err := c.readEntry("index/" + d.Name())
		if err != nil || e.Ref != ref || !ok(e.Version) || policy != "" && e.VerifiedBy != policy {
			continue
		}
		v, err := semver.StrictNewVersion(e.Version)
		if err != nil {
			continue
		}
		if best == nil || v.GreaterThan(bestV) {
			best, bestV = e, v
		}
	}
	return best
}

func (c *chartCache) readEntry(name string) (*cacheEntry, error) {
	f, err := c.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexEntryBytes))
	if err != nil {
		return nil, err
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	if indexName(e.Ref, e.Version) != name || !strings.HasPrefix(e.Digest, "sha256:") {
		return nil, errors.New("not an entry of its name")
	}
	return &e, nil
}

func blobName(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if _, err := hex.DecodeString(h); !ok || err != nil || len(h) != 64 {
		return "", fmt.Errorf("digest %q is not sha256:<hex>", digest)
	}
	return "blobs/sha256/" + h + ".tgz", nil
}

// blob reads the .tgz of digest, at most max bytes, and checks it
// against the digest.
func (c *chartCache) blob(digest string, max int64) ([]byte, error) {
	name, err := blobName(digest)
	if err != nil {
		return nil, err
	}
	f, err := c.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max || "sha256:"+sha256Hex(b) != digest {
		return nil, fmt.Errorf("%s does not match its digest: fetch it again (remove it from the cache)", name)
	}
	return b, nil
}

// store writes the chart's .tgz and its index entry.
func (c *chartCache) store(e *cacheEntry, data []byte) error {
	name, err := blobName(e.Digest)
	if err != nil {
		return err
	}
	if err := c.write(name, data); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return c.write(indexName(e.Ref, e.Version), b)
}

// write writes a file under a temporary name and renames it into place.
func (c *chartCache) write(name string, data []byte) error {
	var r [8]byte
	rand.Read(r[:])
	tmp := name + ".tmp-" + hex.EncodeToString(r[:])
	f, err := c.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.root.Rename(tmp, name)
	}
	if err != nil {
		c.root.Remove(tmp)
	}
	return err
}
