package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/result"
)

// The workflow confines run files to a folder of the checkout
// (workspace: deploy). At the base, that folder is a link in the base's
// tree to the checkout's root (an absolute path the attacker can predict,
// as GITHUB_WORKSPACE is): RunFileAt takes within(workspace), resolved,
// as the base's workspace, so the base's run file (the head checkout's
// own root gantry.yaml, reached through the link) may name any file of the
// checkout outside deploy, such as a token a CI step wrote there, and
// its value is printed in the diff.
func TestAttack4BaseLinkCannotWidenTheWorkspace(t *testing.T) {
	const token = "token-outside-the-workspace-0123456789"
	var repo string
	a := newAtkRepo(t, func(reg string) map[string]string {
		return map[string]string{"deploy": "symlink:" + "REPO"}
	}, func(reg string) map[string]string {
		return map[string]string{
			"deploy/gantry.yaml": headShop(reg),
			// the attacker's files of the head, outside the workflow's workspace
			"gantry.yaml":     "units:\n- name: shop\n  inventory: shop\n  path: ./app\n  substitute:\n    TOKEN: {file: token.txt}\n",
			"app/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\n  namespace: default\ndata:\n  token: ${TOKEN}\n",
			// written by an earlier step of the job, never committed
			"token.txt": token + "\n",
		}
	})
	_ = repo
	g := a.given(map[string]string{"GANTRY_WORKSPACE": filepath.Join(a.repo, "deploy")})
	runFile := filepath.Join(a.repo, "deploy", "gantry.yaml")
	// control: the head's run file may not name token.txt
	if _, err := config.LoadUnits(func() config.Given {
		g2 := g
		return g2
	}(), filepath.Join(a.repo, "gantry.yaml"), false); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("control: a run file outside the workspace was not refused: %v", err)
	}
	units, err := config.LoadUnits(g, runFile, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{BaseRunFile: config.RunFileAt(g, runFile)}
	defer s.Close()
	res := s.Unit(context.Background(), units[0], &infos{}, false)
	var all strings.Builder
	for _, o := range res.Objects {
		all.WriteString(o.Diff)
	}
	t.Logf("%s: %s", res.Reason, res.Message)
	for _, l := range strings.Split(all.String(), "\n") {
		if strings.Contains(l, token) {
			t.Logf("printed: %s", l)
		}
	}
	if res.Reason == result.ReasonProgressing && strings.Contains(all.String(), token) {
		t.Errorf("the base read %s, outside the workflow's workspace %s/deploy, through a link of the base's tree", filepath.Join(a.repo, "token.txt"), a.repo)
	}
}
