package entrypoint

import (
	"context"
	"strings"
	"testing"
)

// An apply that a pull request event runs warns, naming the event and
// how to preview instead; a diff, or an apply on push, does not.
func TestApplyOnPullRequestWarns(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{
		// A build that fails: the run ends before it asks the cluster.
		"app/kustomization.yaml": "resources: [missing.yaml]\n",
		"kubeconfig": "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
			"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n",
	})
	run := func(command, event string) string {
		var out, errs strings.Builder
		Run(context.Background(), []string{command, "--path=" + ws + "/app", "--inventory=shop", "--kubeconfig=" + ws + "/kubeconfig", "--timeout=5s", "--report=" + ws + "/report.json"},
			[]string{"HOME=" + t.TempDir(), "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + ws, "GANTRY_WORKSPACE=" + ws, "GITHUB_EVENT_NAME=" + event}, &out, &errs)
		return errs.String()
	}
	for _, event := range []string{"pull_request", "pull_request_target"} {
		got := run("apply", event)
		if !strings.Contains(got, "::warning title=gantry::apply runs on a "+event+" event") || !strings.Contains(got, "command: diff") {
			t.Errorf("apply on %s: no warning naming the event and diff:\n%s", event, got)
		}
	}
	for _, c := range [][2]string{{"diff", "pull_request"}, {"apply", "push"}} {
		if got := run(c[0], c[1]); strings.Contains(got, "runs on a") {
			t.Errorf("%s on %s warns:\n%s", c[0], c[1], got)
		}
	}
	if w := pullRequestWriteWarning("delete", map[string]string{"GITHUB_EVENT_NAME": "pull_request"}, githubActions); !strings.Contains(w, "delete runs on a pull_request event") {
		t.Errorf("delete: %q", w)
	}
	if w := pullRequestWriteWarning("apply", map[string]string{"GITHUB_EVENT_NAME": "pull_request"}, plainCLI); w != "" {
		t.Errorf("off GitHub: %q", w)
	}
}
