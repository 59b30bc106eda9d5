// Package entrypoint is gantry's front: it reads the command line (cobra)
// and the platform (GitHub Actions, GitLab CI, Tekton, a terminal), hands
// what was given to config, runs the result through runner, and prints
// and reports the outcome.
package entrypoint

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/sethvargo/go-githubactions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/logguard"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/runner"
	"github.com/gantry-dev/gantry/sources"
)

// Version is stamped at build time (-ldflags -X).
var Version = "dev"

// Exit codes, documented in the README.
const (
	ExitOK      = 0 // success
	ExitFailed  = 1 // the deployment failed: validation, apply, prune or health
	ExitInvalid = 2 // invalid input: configuration, or manifests that do not build
	ExitChanges = 3 // changes pending (diff with detailed-exitcode)
)

var discardControllerRuntimeLogs sync.Once

// Run executes gantry with the given arguments and environment (as
// os.Environ returns it) and returns the process exit code.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	discardControllerRuntimeLogs.Do(func() {
		// controller-runtime's client logs through a global logger that
		// warns when never set; gantry reports through its own result
		// instead. Once: setting it is not safe for concurrent runs.
		ctrllog.SetLogger(logr.Discard())
	})

	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	p := detectPlatform(env)
	if p == githubActions {
		// Everything gantry prints on GitHub, to either stream, passes one
		// guard and cannot read as a workflow command: progress, errors,
		// built objects, diffs, the JSON report of --report -. Its own
		// commands go beside the guard (commandWriter).
		stdout, stderr = logguard.New(stdout), logguard.New(stderr)
	}
	inv, err := parseCommandLine(args, env, stdout, stderr)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "gantry: invalid command line: %v\n", err)
		return ExitInvalid
	case inv == nil: // help, version or completion, printed
		return ExitOK
	case inv.Command == "version":
		fmt.Fprintf(stdout, "gantry %s\n", Version)
		return ExitOK
	}
	// Every source makes units: a run file many, the command line and the
	// environment one. plan prints them for a CI engine to run instead.
	if inv.Command == "plan" {
		return runPlan(inv, stdout, stderr)
	}
	if file := runFileOf(inv); file != "" {
		return runFile(ctx, inv, file, p, stdout, stderr)
	}
	return runOne(ctx, inv, p, stdout, stderr)
}

// runOne runs a command of one configuration: a unit (diff, apply,
// delete), or a command on an artifact, a build or the inventory.
func runOne(ctx context.Context, inv *config.Given, p platform, stdout, stderr io.Writer) int {
	env := inv.Env
	cfg, cfgErr := config.Load(*inv)

	// Every secret is known, and masked on GitHub, before anything else is
	// printed.
	var secrets []string
	if cfg != nil {
		secrets = cfg.Secrets
	}
	s := newSession(env, p, secrets, stderr)
	defer s.run.Close()
	if cfg != nil && cfg.Trace {
		defer s.startTrace()()
	}
	if cfg != nil {
		s.console.color, s.console.quiet, s.console.verb = useColor(cfg.Color, stderr, env), cfg.Quiet, cfg.Command
	}
	redact, gha, console := s.redact, s.gha, s.console

	if cfgErr != nil {
		console.printf("gantry: invalid configuration:\n%s\n", config.Indent(cfgErr.Error()))
		if cfg != nil && cfg.Report != "" {
			res := &result.Result{Schema: result.SchemaVersion, Command: cfg.Command, Version: Version,
				Reason: result.ReasonInvalidInput, Message: cfgErr.Error(), Stages: []result.Stage{}, Objects: []result.Object{}}
			if err := (&reporters.JSONReport{Path: cfg.Report, Out: stdout, Redact: redact}).Report(ctx, res); err != nil {
				console.warn("JSON report: " + err.Error())
			}
		}
		return ExitInvalid
	}
	if w := pullRequestWriteWarning(cfg.Command, env, p); w != "" {
		console.warn(w)
	}
	for _, w := range boundWarnings(cfg.HealthWarnings) {
		console.warn(w)
	}
	if cfg.Artifact != "" {
		switch cfg.Command {
		case "pull", "tag", "list", "inspect", "diff-artifact":
			return s.runArtifact(ctx, cfg, stdout)
		}
	}

	var res *result.Result
	switch cfg.Command {
	case "build":
		var objects []*sources.Object
		objects, res = s.run.Render(ctx, cfg, console)
		if res.Succeeded() {
			if err := writeObjects(stdout, objects, p == githubActions, redact); err != nil {
				console.printf("gantry: %v\n", err)
				return ExitFailed
			}
			// A build writes nothing to a cluster: it says what it built.
			what := "objects"
			if len(objects) == 1 {
				what = "object"
			}
			console.printf("gantry build: %d %s, written to stdout\n", len(objects), what)
			return exitCode(res, cfg)
		}
		console.summary(res)
		return exitCode(res, cfg)
	case "inventory":
		return s.runInventory(ctx, cfg, stdout, stderr)
	case "history":
		return s.runHistory(ctx, cfg, stdout, stderr)
	}
	// push, release, rollback, or a run of one unit, as each unit of a
	// run file runs.
	res = s.run.Command(ctx, cfg, console)
	switch {
	case cfg.Command == "diff" && (res.Reason.Succeeded() || res.Reason == result.ReasonProgressing),
		cfg.Command == "drift" && (res.Reason.Succeeded() || res.Reason == result.ReasonDriftDetected) && cfg.Output == "text":
		if err := writeDiff(stdout, res, cfg.Output, workspace(env), p == githubActions, useColor(cfg.Color, stdout, env), redact); err != nil {
			console.warn("printing the diff: " + err.Error())
		}
	case cfg.Command == "release" && res.Succeeded() && cfg.Artifact != "" && cfg.Output == "text":
		if err := writeFluxObjects(stdout, cfg); err != nil {
			console.warn("Flux objects: " + err.Error())
		}
	case cfg.Output != "text":
		// The result as the report holds it, for every command that
		// reports one.
		if err := writeDiff(stdout, res, cfg.Output, workspace(env), p == githubActions, false, redact); err != nil {
			console.warn("printing the result: " + err.Error())
		}
	}

	console.summary(res)
	set, warnings := reporterSet(cfg, env, p, redact, gha, stdout)
	for _, w := range warnings {
		console.warn(w)
	}
	// A reporter that fails warns; it never turns a good deploy red.
	for _, err := range set.Report(ctx, res) {
		console.warn(err.Error())
	}
	return exitCode(res, cfg)
}

// session is what every unit of one invocation shares: the environment,
// the platform, the secrets to mask and the console.
type session struct {
	env      map[string]string
	platform platform
	redact   *redact.Redactor
	gha      *githubactions.Action // on GitHub only
	console  *console
	maskMu   sync.Mutex
	// run runs the units and commands, through the pipeline.
	run *runner.Session
}

// newSession masks every secret, on GitHub too, before anything is printed.
func newSession(env map[string]string, p platform, secrets []string, stderr io.Writer) *session {
	s := &session{env: env, platform: p, redact: redact.New(secrets...)}
	if p == githubActions {
		s.gha = githubAction(logguard.Commands(stderr), env)
		for _, v := range s.redact.Secrets() {
			s.gha.AddMask(v)
		}
	}
	s.console = newConsole(stderr, s.redact, p)
	s.run = &runner.Session{Version: Version, Holder: holder(env), Actor: actor(env), Decrypted: s.decrypted, SecretValues: s.secretValues,
		Secret: func(v string) bool { return s.redact.String(v) != v }, Mask: s.redact.String}
	return s
}

// startTrace records every request sent to a cluster from now on; the
// function it returns prints them.
func (s *session) startTrace() func() {
	write := s.run.StartTrace()
	return func() {
		var b strings.Builder
		write(&b)
		s.console.printf("%s", b.String())
	}
}

// decrypted masks the values a build decrypts, like any secret, from then on.
func (s *session) decrypted(values []string) {
	s.maskMu.Lock()
	defer s.maskMu.Unlock()
	for _, v := range s.redact.Add(values...) {
		if s.gha != nil {
			s.gha.AddMask(v)
		}
	}
}

// secretValues masks the values of the set's Secrets from then on, in
// gantry's own output: they come from the workflow's files, and are not
// told to the platform.
func (s *session) secretValues(values []string) {
	s.maskMu.Lock()
	defer s.maskMu.Unlock()
	s.redact.Add(values...)
}

// exitCode maps a result to the documented exit codes.
func exitCode(res *result.Result, cfg *config.Config) int {
	if res.ReachedGoal() {
		return ExitOK
	}
	switch res.Reason {
	case result.ReasonProgressing:
		if cfg.DetailedExitcode {
			return ExitChanges
		}
		return ExitOK
	case result.ReasonDriftDetected:
		return ExitChanges
	case result.ReasonBuildFailed, result.ReasonInvalidInput:
		return ExitInvalid
	default:
		return ExitFailed
	}
}

// holder names this run in the inventory's lock, so that a run that has to
// wait can say who it waits for.
func holder(env map[string]string) string {
	host, _ := os.Hostname()
	// The run id makes every run distinct even within one process or
	// container; the lock treats a lease with its own holder as its own.
	h := fmt.Sprintf("gantry %s on %s (pid %d, run %s)", Version, host, os.Getpid(), strings.ToLower(rand.Text()[:8]))
	switch {
	case env["GITHUB_RUN_ID"] != "":
		h += fmt.Sprintf(", %s/%s/actions/runs/%s", env["GITHUB_SERVER_URL"], env["GITHUB_REPOSITORY"], env["GITHUB_RUN_ID"])
	case env["CI_JOB_URL"] != "":
		h += ", " + env["CI_JOB_URL"]
	}
	return h
}

// actor names who runs gantry, for the revisions it records: the CI's
// user and its run, or the local user and host.
func actor(env map[string]string) string {
	switch {
	case env["GITHUB_ACTOR"] != "":
		return fmt.Sprintf("%s (%s/%s/actions/runs/%s)", env["GITHUB_ACTOR"], env["GITHUB_SERVER_URL"], env["GITHUB_REPOSITORY"], env["GITHUB_RUN_ID"])
	case env["GITLAB_USER_LOGIN"] != "":
		return fmt.Sprintf("%s (%s)", env["GITLAB_USER_LOGIN"], env["CI_JOB_URL"])
	}
	host, _ := os.Hostname()
	name := cmp.Or(env["USER"], env["LOGNAME"])
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	return cmp.Or(name, "unknown") + "@" + host
}

// Load reads the command line and validates the whole configuration, as
// config.Load does. Help, the version and completions are printed to
// stdout, and Load then returns errHelp.
func Load(args []string, env map[string]string, stdout io.Writer) (*config.Config, error) {
	inv, err := parseCommandLine(args, env, stdout, stdout)
	if err != nil {
		return nil, err
	}
	if inv == nil {
		return nil, errHelp
	}
	return config.Load(*inv)
}
