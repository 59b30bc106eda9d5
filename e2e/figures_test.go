package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// figures are the reliability figures this package's tests measure. When
// GANTRY_FIGURES names a file, the test binary appends them to it at the
// end (make test and make soak print it); docs/reliability.md records
// them with the command that produced them.
var figures struct {
	killPoints, killSurvived   atomic.Int32
	interleavings, interleaved atomic.Int32
	badInputs, badRefused      atomic.Int32
	lost, orphans              atomic.Int32
	// lateWrites landed after the run that sent them was stopped and
	// another took over; orphans counts what the next run left of them.
	lateWrites               atomic.Int32
	paused, pausedFenced     atomic.Int32
	secretScans, secretLeaks atomic.Int32
	// offlineCaught of offlineRejected: what offline validation catches
	// of the objects the API server rejects (the corpus of
	// testdata/offline).
	offlineRejected, offlineCaught atomic.Int32
	// recordRefused of recordAttacks: runs that would write from a
	// cluster record a namespace writer forged, changed or emptied of
	// its key, and refused to (recordattacks_test.go).
	recordAttacks, recordRefused atomic.Int32
}

// recordAttack counts one run that must refuse to write from a record it
// cannot trust, and whether it did.
func recordAttack(refused bool) bool {
	figures.recordAttacks.Add(1)
	if refused {
		figures.recordRefused.Add(1)
	}
	return refused
}

// scanForSecrets counts one scan of text for secret values and returns
// those it finds.
func scanForSecrets(text string, secrets ...string) []string {
	var found []string
	for _, s := range secrets {
		for _, form := range encodedForms(s) {
			figures.secretScans.Add(1)
			if strings.Contains(text, form) {
				figures.secretLeaks.Add(1)
				found = append(found, form)
			}
		}
	}
	return found
}

// encodedForms are the forms a secret value takes in what gantry writes:
// as it is, JSON-escaped (with and without HTML escaping), YAML
// single-quoted, and base64-encoded (standard and URL, with and without
// padding); each form of 8 characters or more is scanned for.
func encodedForms(s string) []string {
	if s == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if (len(f) >= 8 || f == s) && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	add(s)
	j, _ := json.Marshal(s)
	add(string(j[1 : len(j)-1]))
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	if e := strings.TrimSpace(b.String()); len(e) >= 2 {
		add(e[1 : len(e)-1])
	}
	add(strings.ReplaceAll(s, "'", "''"))
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(e.EncodeToString([]byte(s)))
	}
	return out
}

func writeFigures(seed uint64) {
	path := os.Getenv("GANTRY_FIGURES")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "figures:", err)
		return
	}
	defer f.Close()
	fi := &figures
	fmt.Fprintf(f, "e2e (seed %d): kill points survived %d of %d; interleavings tried %d, writes interleaved %d; paused runs fenced %d of %d (late writes %d, pruned by the next run); bad inputs refused %d of %d; objects lost %d; orphans %d; secret scans %d (each form: as written, JSON- and YAML-escaped, base64), secrets leaked %d\n",
		seed, fi.killSurvived.Load(), fi.killPoints.Load(), fi.interleavings.Load(), fi.interleaved.Load(),
		fi.pausedFenced.Load(), fi.paused.Load(), fi.lateWrites.Load(),
		fi.badRefused.Load(), fi.badInputs.Load(), fi.lost.Load(), fi.orphans.Load(), fi.secretScans.Load(), fi.secretLeaks.Load())
	if n := fi.recordAttacks.Load(); n > 0 {
		fmt.Fprintf(f, "e2e: record attacks (a namespace writer's forged, changed or unsigned revisions) refused %d of %d\n", fi.recordRefused.Load(), n)
	}
	if n := fi.offlineRejected.Load(); n > 0 {
		fmt.Fprintf(f, "e2e: offline validation caught %d of the %d objects the API server rejects\n", fi.offlineCaught.Load(), n)
	}
}
