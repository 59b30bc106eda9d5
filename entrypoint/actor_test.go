package entrypoint

import (
	"strings"
	"testing"
)

// A revision names who ran gantry: the CI's user and its run, or the
// local user.
func TestActor(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GITHUB_ACTOR": "octocat", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/shop", "GITHUB_RUN_ID": "42"},
			"octocat (https://github.com/acme/shop/actions/runs/42)"},
		{map[string]string{"GITLAB_USER_LOGIN": "ada", "CI_JOB_URL": "https://gitlab.example.com/acme/shop/-/jobs/7"},
			"ada (https://gitlab.example.com/acme/shop/-/jobs/7)"},
		{map[string]string{"USER": "ada"}, "ada@"},
	} {
		if got := actor(tc.env); !strings.HasPrefix(got, tc.want) {
			t.Errorf("actor(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
	if got := actor(map[string]string{}); strings.HasPrefix(got, "@") {
		t.Errorf("no user named: %q", got)
	}
}
