package entrypoint

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters"
)

// platform is where gantry runs, which decides how it prints and where it
// reports.
type platform int

const (
	plainCLI platform = iota
	githubActions
	gitlabCI
)

func detectPlatform(env map[string]string) platform {
	switch {
	case env["GITHUB_ACTIONS"] == "true":
		return githubActions
	case env["GITLAB_CI"] == "true":
		return gitlabCI
	default:
		return plainCLI
	}
}

// defaultReportPath is where the JSON report goes when report is not set:
// in CI, inside the working directory (the workspace), which the runner
// mounts into a container action and later steps can read at the same
// relative path.
func defaultReportPath(p platform) string {
	if p == plainCLI {
		return ""
	}
	return filepath.Join(".gantry", "report.json")
}

// diffPathFor puts the diff file next to the report.
func diffPathFor(report string) string {
	if report == "" {
		return ""
	}
	return strings.TrimSuffix(report, ".json") + ".diff"
}

// pullRequestNumber reads the pull request's number from the event payload.
func pullRequestNumber(env map[string]string) (int, error) {
	b, err := os.ReadFile(env["GITHUB_EVENT_PATH"])
	if err != nil {
		return 0, fmt.Errorf("reading the event payload: %w", err)
	}
	var ev struct {
		PullRequest *struct {
			Number int `json:"number"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return 0, fmt.Errorf("reading the event payload: %w", err)
	}
	if ev.PullRequest == nil || ev.PullRequest.Number == 0 {
		return 0, fmt.Errorf("the %s event has no pull request", env["GITHUB_EVENT_NAME"])
	}
	return ev.PullRequest.Number, nil
}

// reporterSet assembles the reporters for where gantry runs and what the
// inputs ask. Problems that only keep a reporter from running are returned
// as warnings.
func reporterSet(cfg *config.Config, env map[string]string, p platform, redact *redact.Redactor, gha *githubactions.Action, stdout io.Writer) (reporters.Multi, []string) {
	var set reporters.Multi
	var warnings []string
	report := cfg.Report
	if report == "" {
		report = defaultReportPath(p)
	}
	diff := diffPathFor(report)
	switch report {
	case "":
	case "-":
		// The report on stdout; its diffs are in it, and there is no
		// file for the outputs to name.
		set = append(set, &reporters.JSONReport{Path: report, Out: stdout, Redact: redact})
		report, diff = "", ""
	default:
		set = append(set, &reporters.JSONReport{Path: report, Redact: redact}, &reporters.DiffFile{Path: diff, Redact: redact})
	}

	switch p {
	case githubActions:
		page := reporters.Page{RunURL: reporters.RunURL(func(k string) string { return env[k] })}
		if want(cfg.Summary, env["GITHUB_STEP_SUMMARY"] != "") {
			set = append(set, &reporters.GitHubSummary{Action: gha, Page: page, Redact: redact})
		}
		if env["GITHUB_OUTPUT"] != "" {
			set = append(set, &reporters.GitHubOutputs{Path: env["GITHUB_OUTPUT"], ReportPath: report, DiffPath: diff, Redact: redact})
		}
		set = append(set, &reporters.GitHubAnnotations{Action: gha, Workspace: env["GITHUB_WORKSPACE"], Redact: redact})
		isPR := strings.HasPrefix(env["GITHUB_EVENT_NAME"], "pull_request")
		if want(cfg.Comment, isPR) {
			n, err := pullRequestNumber(env)
			owner, repo, _ := strings.Cut(env["GITHUB_REPOSITORY"], "/")
			switch {
			case err != nil:
				warnings = append(warnings, "pull request comment: "+err.Error())
			case cfg.GitHubToken == "":
				warnings = append(warnings, "pull request comment: no github-token")
			default:
				set = append(set, &reporters.PullRequestComment{
					APIURL: githubAPI(env), GraphQLURL: env["GITHUB_GRAPHQL_URL"], Token: cfg.GitHubToken,
					Owner: owner, Repo: repo, Number: n, Page: page, Redact: redact,
				})
			}
		}
		if cfg.Command == "drift" && want(cfg.DriftIssue, cfg.GitHubToken != "") {
			owner, repo, _ := strings.Cut(env["GITHUB_REPOSITORY"], "/")
			if cfg.GitHubToken == "" || repo == "" {
				warnings = append(warnings, "drift issue: needs github-token and GITHUB_REPOSITORY")
			} else {
				set = append(set, &reporters.GitHubDriftIssue{APIURL: githubAPI(env), GraphQLURL: env["GITHUB_GRAPHQL_URL"], Token: cfg.GitHubToken,
					Owner: owner, Repo: repo, Page: page, Redact: redact})
			}
		}
	case gitlabCI:
		dotenv := cfg.Dotenv
		if dotenv == "" {
			dotenv = "gantry.env"
		}
		set = append(set, &reporters.Dotenv{Path: dotenv, ReportPath: report, DiffPath: diff, Redact: redact, Inputs: isInputVariable})
		isMR := env["CI_MERGE_REQUEST_IID"] != ""
		if want(cfg.Comment, isMR) {
			iid, err := strconv.ParseInt(env["CI_MERGE_REQUEST_IID"], 10, 64)
			if err != nil {
				warnings = append(warnings, "merge request note: not a merge request pipeline (CI_MERGE_REQUEST_IID is not set)")
			} else {
				set = append(set, &reporters.MergeRequestNote{
					APIURL: env["CI_API_V4_URL"], Token: cfg.GitLabToken, ProjectID: env["CI_PROJECT_ID"], IID: iid,
					Page: reporters.Page{RunURL: env["CI_JOB_URL"]}, Redact: redact,
				})
			}
		}
		if cfg.Command == "drift" && want(cfg.DriftIssue, cfg.GitLabToken != "") {
			set = append(set, &reporters.GitLabDriftIssue{APIURL: env["CI_API_V4_URL"], Token: cfg.GitLabToken, ProjectID: env["CI_PROJECT_ID"],
				Page: reporters.Page{RunURL: env["CI_JOB_URL"]}, Redact: redact})
		}
	}
	if p != gitlabCI && cfg.Dotenv != "" {
		set = append(set, &reporters.Dotenv{Path: cfg.Dotenv, ReportPath: report, DiffPath: diff, Redact: redact, Inputs: isInputVariable})
	}

	tekton := cfg.TektonResults
	if tekton == "" {
		if info, err := os.Stat("/tekton/results"); err == nil && info.IsDir() {
			tekton = "/tekton/results"
		}
	}
	if tekton != "" {
		set = append(set, &reporters.TektonResults{Dir: tekton, Redact: redact})
	}
	return set, warnings
}

// githubAPI is GitHub's REST API, as the runner names it.
func githubAPI(env map[string]string) string {
	if api := env["GITHUB_API_URL"]; api != "" {
		return api
	}
	return "https://api.github.com"
}

// want resolves an auto/true/false input.
func want(setting string, auto bool) bool {
	switch setting {
	case "true":
		return true
	case "false":
		return false
	default:
		return auto
	}
}

// githubAction is the workflow-command writer: everything goes to w (the
// log stream gantry's progress uses), so masks come before any other line.
func githubAction(w io.Writer, env map[string]string) *githubactions.Action {
	return githubactions.New(githubactions.WithWriter(w), githubactions.WithGetenv(func(k string) string { return env[k] }))
}

// pullRequestWriteWarning is the warning for an apply or delete that a
// GitHub pull request event runs: the Action's default command is apply,
// so a workflow on pull_request deploys a change before its review. It
// warns rather than refuses, since some do mean to (a preview
// environment per pull request). "" when there is nothing to warn of.
func pullRequestWriteWarning(command string, env map[string]string, p platform) string {
	event := env["GITHUB_EVENT_NAME"]
	if p != githubActions || event != "pull_request" && event != "pull_request_target" {
		return ""
	}
	if command != "apply" && command != "delete" {
		return ""
	}
	return fmt.Sprintf("%s runs on a %s event: it changes the cluster with the pull request's configuration, before it is reviewed and merged. "+
		"To preview the change on pull requests instead, set command: diff (the Action's default command is apply), and apply on push to the branch you deploy from.", command, event)
}

// isInputVariable says whether v is the GANTRY_ variable of one of
// gantry's inputs.
func isInputVariable(v string) bool {
	for _, in := range config.Inputs {
		if in.GantryEnvName() == v {
			return true
		}
	}
	return false
}
