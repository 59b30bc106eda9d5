package reporters

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
)

// Attack (reproduced, now fixed): the PR controls a decrypted SOPS value (masked secret) and an
// object's printed text (status message, manifest). String first runs
// the strings.Replacer as a "does anything match" check; its generic
// algorithm walks the trie from every position, so a long value that
// shares a long prefix with the text costs len(text)*len(value): the
// automaton's linear bound is lost before it runs.
func TestRedactorStringLinearInTextAttack(t *testing.T) {
	secret := strings.Repeat("a", 100000) + "Z"
	r := redact.New(secret)
	text := strings.Repeat("a", 2000000)
	start := time.Now()
	_ = r.String(text)
	// Linear, it takes about a tenth of a second; walking the value from
	// every byte, about four seconds.
	if d := time.Since(start); d > time.Second {
		t.Fatalf("String of a %d-byte text with one %d-byte value took %s", len(text), len(secret), d)
	}
}

// Attack (same, many values): values a^k Z for k up to 1000 make the
// replacer's trie branch at every depth, so its check walks up to 1000
// nodes from every byte of a text of a's.
func TestRedactorStringManyPrefixValuesAttack(t *testing.T) {
	var values []string
	for k := 4; k <= 1000; k++ {
		values = append(values, strings.Repeat("a", k)+"Z")
	}
	r := redact.New(values...)
	text := strings.Repeat("a", 1000000)
	start := time.Now()
	_ = r.String(text)
	// Linear, it takes about a tenth of a second; walking the values
	// from every byte, about seven.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("String of a %d-byte text with %d values took %s", len(text), len(values), d)
	}
}

// Attack (reproduced, now fixed): the PR controls a decrypted SOPS value's size (or anyone who
// writes a live field a revision recorded as secret, masked per object by
// Add). The coverer has one map entry and five slice elements per byte of
// every form (about 15 forms per value: JSON, YAML, Markdown, HTML, four
// base64 encodings of each of the whole, trimmed, and line forms), and it
// is rebuilt from every value on every Add. One 1 MiB value costs
// hundreds of MiB; the replacer it replaces as masker compresses
// unbranched paths.
func TestRedactorAddMemoryPerValueAttack(t *testing.T) {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[(i*7919+i/62)%62]
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := redact.New(string(b))
	r.String("made on its first use")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(r)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("1 MiB value: %d MiB allocated, %s", alloc>>20, took)
	if alloc > 200<<20 || took > 2*time.Second {
		t.Fatalf("masking one 1 MiB value allocated %d MiB in %s", alloc>>20, took)
	}
}
