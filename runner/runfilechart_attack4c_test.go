package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

// Held checks: a base run file that is ambiguous or too large fails the
// unit's diff, named, rather than picking one unit.
func TestAttack4HeldBaseRunFileIdentity(t *testing.T) {
	shop := func(reg, name, inv, more string) string {
		return fmt.Sprintf("- name: %s\n  inventory: %s\n  chart: oci://%s/charts/shop\n  chart-version: 1.2.0\n  release-name: web\n  chart-hooks: leave-out\n%s", name, inv, reg, more)
	}
	cases := map[string]func(reg string) string{
		"duplicate": func(reg string) string {
			return "units:\n" + shop(reg, "shop", "shop", "") + shop(reg, "shop", "shop2", "  target-namespace: other\n")
		},
		"cycle": func(reg string) string {
			return "units:\n" + shop(reg, "shop", "shop", "  depends-on: [b]\n") + shop(reg, "b", "b", "  depends-on: [shop]\n")
		},
		"invalid": func(reg string) string { return "units: [\n" },
		"huge": func(reg string) string {
			return "units:\n" + shop(reg, "shop", "shop", "") + "# " + strings.Repeat("x", 2<<20) + "\n"
		},
		"too many": func(reg string) string {
			var b strings.Builder
			b.WriteString("units:\n")
			for i := 0; i < 1001; i++ {
				fmt.Fprintf(&b, "- name: u%d\n", i)
			}
			return b.String()
		},
	}
	for name, base := range cases {
		t.Run(name, func(t *testing.T) {
			a := newAtkRepo(t, func(reg string) map[string]string {
				return map[string]string{"gantry.yaml": base(reg)}
			}, func(reg string) map[string]string {
				return map[string]string{"gantry.yaml": headShop(reg)}
			})
			res, _ := a.run(t, a.given(nil))
			t.Logf("%s: %.300s", res[0].Reason, res[0].Message)
			if res[0].Reason != result.ReasonBuildFailed {
				t.Errorf("want the unit's diff to fail: %s", res[0].Reason)
			}
		})
	}
}
