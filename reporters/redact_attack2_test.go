package reporters

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/redact"
)

// A multi-line secret value (here 14 bytes, well above the documented
// 4-byte floor) is masked line by line, and a line shorter than 4 bytes
// is dropped: when the full value is printed, as is or JSON-escaped, its
// short lines are printed in clear.
func TestRedactorMultiLineValueShortLineAttack2(t *testing.T) {
	secret := "hunter2\nxyz\nQ7"
	r := redact.New(secret)
	for _, text := range []string{
		"password: " + secret + "\n",      // as is
		`{"password":"hunter2\nxyz\nQ7"}`, // as JSON writes it
	} {
		got := r.String(text)
		for _, part := range []string{"xyz", "Q7"} {
			if strings.Contains(got, part) {
				t.Errorf("secret line %q of the value printed: %q", part, got)
			}
		}
	}
}

// A value whose every line is shorter than 4 bytes is not masked at all,
// though the value itself is 11 bytes long.
func TestRedactorMultiLineAllShortLinesAttack2(t *testing.T) {
	secret := "abc\ndef\nghi"
	r := redact.New(secret)
	if got := r.String("token=" + secret); strings.Contains(got, "def") {
		t.Errorf("an 11-byte multi-line value printed in clear: %q", got)
	}
}

// Values added one at a time, each followed by a print (as decrypted
// values are added build by build while the console prints), rebuild the
// whole masker on every print: quadratic in the number of values. 2000
// values of 200 bytes, each Add followed by String of a 10 KB text, take
// over 12 s here, against tens of milliseconds for the same values added
// at once.
func TestRedactorRebuildPerAddQuadraticAttack2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([]string, 2000)
	for i := range vals {
		b := make([]byte, 200)
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		vals[i] = string(b)
	}
	text := strings.Repeat("hello world, nothing secret here. ", 300)[:10000]

	start := time.Now()
	once := redact.New(vals...)
	once.String(text)
	batch := time.Since(start)

	start = time.Now()
	r := redact.New()
	for _, v := range vals {
		r.Add(v)
		r.String(text)
	}
	each := time.Since(start)
	t.Logf("all at once: %v; one Add + String at a time: %v", batch, each)
	if each > 20*batch+2*time.Second {
		t.Errorf("2000 Add+String took %v, %v when added at once", each, batch)
	}
}

// Many short values cost the automaton far more than one long value of
// the same size: every byte of every form up to 64 bytes is a state (a
// map entry, its failure and its longest, and while built its children
// slice, depth and byte). 10,000 values of 48 printable bytes (470 KB, as
// one SOPS file a pull request adds could hold) retain about 100 MiB and
// take seconds to build on the first String, where the commit measured
// 61 MiB and 0.2 s for one 1 MiB value; 40,000 such values (1.9 MB)
// retained 418 MiB after 2.9 GB of allocations and 23 s here.
func TestRedactorManyShortValuesMemoryAttack2(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := make([]string, 10000)
	for i := range vals {
		b := make([]byte, 48)
		for j := range b {
			b[j] = byte('!' + rng.IntN(90))
		}
		vals[i] = string(b)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := redact.New(vals...)
	r.String("x")
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("10,000 values of 48 bytes: %v, %d MiB allocated, %d MiB retained", took, (after.TotalAlloc-before.TotalAlloc)>>20, retained>>20)
	if retained > 64<<20 {
		t.Errorf("470 KB of values retain %d MiB", retained>>20)
	}
	runtime.KeepAlive(r)
}

// Add alone is quadratic too, without any String: each call makes a map
// of every value added so far and sorts them all again. Added one at a
// time (one SOPS file each), 16,000 values take about 16 times as long as
// 4,000 (here 5.4 s against 0.48 s, 11 times), where linear work would
// take 4.
func TestRedactorAddOneAtATimeQuadraticAttack2(t *testing.T) {
	addEach := func(n int) time.Duration {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("value-%08d-abcdefghijklmnop", i)
		}
		start := time.Now()
		r := redact.New()
		for _, v := range vals {
			r.Add(v)
		}
		return time.Since(start)
	}
	small, large := addEach(4000), addEach(16000)
	t.Logf("4,000 Adds: %v; 16,000 Adds: %v", small, large)
	if large > 8*small && large > time.Second {
		t.Errorf("4 times the values one Add at a time took %.1f times as long", float64(large)/float64(small))
	}
}
