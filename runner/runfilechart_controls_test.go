package runner

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/result"
)

func TestHeadRendersTheWorkflowsValuesFile(t *testing.T) {
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": strings.Replace(headShop(reg), "name: shop", "name: zzz", 1), "values.yaml": "replicaCount: 2\n"}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "values.yaml": "replicaCount: 9\n"}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_VALUES": "values.yaml"}))
	all := strings.Join(lines, "\n")
	t.Logf("%s %s", res[0].Reason, res[0].Message)
	if !strings.Contains(all, "replicas: 9") || res[0].Reason != result.ReasonProgressing {
		t.Errorf("head did not take values.yaml:\n%s", all)
	}
}

func TestHeadAppliesTheWorkflowsPatch(t *testing.T) {
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": strings.Replace(headShop(reg), "name: shop", "name: zzz", 1), "patch.yaml": "x: 1\n"}
	}, func(reg string) map[string]string {
		return map[string]string{"gantry.yaml": headShop(reg), "patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-shop\n  namespace: default\nspec:\n  replicas: 40\n"}
	})
	res, lines := a.run(t, a.given(map[string]string{"GANTRY_PATCHES": "patch.yaml"}))
	t.Logf("%s %s", res[0].Reason, res[0].Message)
	if !strings.Contains(strings.Join(lines, "\n"), "replicas: 40") {
		t.Errorf("head did not take patch.yaml")
	}
}
