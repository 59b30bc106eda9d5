package entrypoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/suggest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/tools/clientcmd"
)

// parseCommandLine reads the command line with cobra. The command is its
// first argument, or else INPUT_COMMAND or GANTRY_COMMAND, as the GitHub
// Action and the GitLab and Tekton templates give it. It returns nil and no
// error when it printed what was asked (help, version, completion).
func parseCommandLine(args []string, env map[string]string, stdout, stderr io.Writer) (*config.Given, error) {
	inv := &config.Given{CommandOrigin: "the command line", Env: env}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		for _, name := range []string{"INPUT_COMMAND", "GANTRY_COMMAND"} {
			if c := strings.TrimSpace(env[name]); c != "" {
				args = append([]string{c}, args...)
				inv.CommandOrigin = name
				break
			}
		}
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !slices.Contains(commands, args[0]) {
		switch args[0] {
		case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		default:
			if best := suggest.Closest(args[0], commands); best != "" {
				return nil, fmt.Errorf("command (from %s): unknown command %q; did you mean %s? (see gantry --help)", inv.CommandOrigin, args[0], best)
			}
			return nil, fmt.Errorf("command (from %s): %q is not one of %s", inv.CommandOrigin, args[0], strings.Join(commands, ", "))
		}
	}
	root := newCLI(inv, stdout, stderr)
	// Never nil: cobra reads os.Args then.
	root.SetArgs(append([]string{}, normalizeArgs(args)...))
	if _, err := root.ExecuteC(); err != nil {
		return nil, err
	}
	if inv.Command == "" {
		return nil, nil
	}
	return inv, nil
}

// normalizeArgs lets a boolean flag take its value as the next argument
// (--prune false) where that is unambiguous: the next argument is true or
// false. It also reads Go's single-dash style (-inventory x) as the flag of
// that name, as earlier gantry releases took it.
func normalizeArgs(args []string) []string {
	inputs := map[string]config.Input{}
	for _, in := range config.Inputs {
		inputs[in.Name] = in
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if _, ok := inputs[name]; ok && len(name) > 1 {
				a = "-" + a
			}
		}
		if name, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(name, "=") && inputs[name].Bool && i+1 < len(args) {
			switch strings.ToLower(args[i+1]) {
			case "true", "false":
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// inputValue is a flag's pflag.Value. It keeps the raw text, so that every
// input is validated in one place whatever its source.
type inputValue struct {
	in  config.Input
	v   string
	set bool
}

func (f *inputValue) String() string { return f.v }

func (f *inputValue) Set(s string) error {
	if f.in.Lines && f.set {
		f.v += "\n" + s
	} else {
		f.v = s
	}
	f.set = true
	return nil
}

// Type names the value in help: a repeatable flag takes strings; a number
// or a duration is named by its default.
func (f *inputValue) Type() string {
	switch {
	case f.in.Bool:
		return "bool"
	case f.in.Lines:
		return "strings"
	}
	if _, err := strconv.Atoi(f.in.Default); err == nil {
		return "int"
	}
	if _, err := time.ParseDuration(f.in.Default); err == nil {
		return "duration"
	}
	return "string"
}

// IsBoolFlag lets a bool input be given bare (--prune).
func (f *inputValue) IsBoolFlag() bool { return f.in.Bool }

func init() {
	// Commands are listed as commandTable orders them: in the order of use.
	cobra.EnableCommandSorting = false
}

// newCLI is gantry's command tree. Each command's run records the
// invocation; the configuration is validated and run by Run.
func newCLI(inv *config.Given, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gantry",
		Short: "Ship Kubernetes configuration from CI: build, validate, apply, prune, wait, report",
		Long: `gantry builds Kubernetes configuration (kustomize overlays or plain folders of
manifests), validates all of it against the cluster before writing any,
applies it with server-side apply, prunes what was removed, waits until it is
ready, and reports what happened: on the console, in the GitHub job summary,
as a pull request comment or merge request note, and as step outputs.

Every flag is also an environment variable, GANTRY_ and its name in upper
case with underscores (--inventory-namespace is GANTRY_INVENTORY_NAMESPACE),
and an input of the GitHub Action. A flag wins over a variable.

Exit codes: 0 success; 1 the deployment failed (or the cluster did not
answer); 2 invalid input; 3 changes pending (diff with --detailed-exitcode),
or drift found (drift).`,
		Version:           Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("gantry {{.Version}}\n")
	root.AddGroup(&cobra.Group{ID: commandsDeploy, Title: "Deploy commands:"},
		&cobra.Group{ID: commandsArtifact, Title: "Artifact commands:"},
		&cobra.Group{ID: commandsOther, Title: "Other commands:"})
	root.SetHelpCommandGroupID(commandsOther)
	root.SetCompletionCommandGroupID(commandsOther)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == root {
			return fmt.Errorf("%w: a command comes first, as in gantry apply --inventory shop (gantry --help lists them)", err)
		}
		return flagError(c, err)
	})

	for _, spec := range commandTable {
		cmd := &cobra.Command{
			Use:     spec.Name + " [flags]",
			Short:   spec.Short,
			Long:    spec.Long,
			Example: spec.Example,
			GroupID: spec.Group,
			Args:    cobra.NoArgs,
			RunE: func(c *cobra.Command, args []string) error {
				inv.Command = spec.Name
				inv.Flags = map[string]string{}
				c.Flags().Visit(func(f *pflag.Flag) {
					if v, ok := f.Value.(*inputValue); ok {
						inv.Flags[v.in.Name] = v.v
					}
				})
				if f := c.Flags().Lookup("no-color"); f != nil && f.Changed {
					inv.Flags["color"] = f.Value.(*noColorValue).v
				}
				if len(args) > 0 {
					if _, given := inv.Flags["path"]; given {
						return fmt.Errorf("path given twice: as the argument %q and as --path", args[0])
					}
					inv.Path = args[0]
				}
				return nil
			},
		}
		if spec.Long == "" {
			cmd.Long = spec.Short + "."
		}
		if spec.PathArg {
			cmd.Use = spec.Name + " [path] [flags]"
			cmd.Args = func(c *cobra.Command, args []string) error {
				if len(args) > 1 {
					return fmt.Errorf("%s takes one path, got %d arguments: %s", spec.Name, len(args), strings.Join(args, " "))
				}
				return nil
			}
			cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return nil, cobra.ShellCompDirectiveFilterDirs
			}
		} else {
			cmd.Args = func(c *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("unexpected argument %q: %s takes its settings as flags, such as --name value", args[0], spec.Name)
				}
				return nil
			}
		}
		addFlags(cmd, spec.Name)
		cmd.SetUsageFunc(usage)
		root.AddCommand(cmd)
	}
	return root
}

// addFlags gives cmd the flags of the inputs it reads, each with its
// completion.
func addFlags(cmd *cobra.Command, name string) {
	for _, in := range config.Inputs {
		if !slices.Contains(strings.Fields(in.For), name) {
			continue
		}
		shorthand := ""
		if in.Name == "output" {
			shorthand = "o" // as kubectl spells it
		}
		f := cmd.Flags().VarPF(&inputValue{in: in, v: in.Default}, in.Name, shorthand, brief(in.Description))
		if in.Bool {
			f.NoOptDefVal = "true"
		}
		var complete []string
		switch {
		case in.Bool:
			complete = []string{"true", "false"}
		case in.Name == "output":
			complete = []string{"text", "json", "yaml"}
			if cmd.Name() == "validate" || cmd.Name() == "diff" {
				complete = append(complete, "junit", "sarif")
			}
		case in.Name == "summary" || in.Name == "comment":
			complete = []string{"auto", "true", "false"}
		case in.Name == "color":
			complete = []string{"auto", "always", "never"}
		case in.Name == "format":
			complete = []string{"github", "tekton", "gitlab"}
		case in.Name == "sign" || in.Name == "verify":
			complete = []string{"cosign"}
		case in.Name == "path":
			_ = cmd.MarkFlagDirname(in.Name)
		case in.Name == "context":
			_ = cmd.RegisterFlagCompletionFunc(in.Name, completeContexts)
		case in.Name == "kubeconfig" || in.Name == "patches" || in.Name == "report" || in.Name == "certificate-roots":
			_ = cmd.MarkFlagFilename(in.Name)
		}
		if complete != nil {
			_ = cmd.RegisterFlagCompletionFunc(in.Name, cobra.FixedCompletions(complete, cobra.ShellCompDirectiveNoFileComp))
		}
		if in.Name == "color" {
			// As most CLIs spell it.
			nc := cmd.Flags().VarPF(&noColorValue{v: "auto"}, "no-color", "", "The same as --color never.")
			nc.NoOptDefVal = "true"
		}
	}
}

// brief is a description's first sentence and those that give a default:
// help stays short, docs/reference.md has the rest.
func brief(description string) string {
	var keep []string
	rest := description
	for rest != "" {
		end := len(rest)
		for i := 0; i+2 < len(rest); i++ {
			// A sentence ends at ". " before a capital (not "1... lines").
			if rest[i] == '.' && rest[i+1] == ' ' && unicode.IsUpper(rune(rest[i+2])) {
				end = i + 1
				break
			}
		}
		sentence := strings.TrimSpace(rest[:end])
		if len(keep) == 0 || strings.HasPrefix(sentence, "Default") {
			keep = append(keep, sentence)
		}
		rest = strings.TrimSpace(rest[end:])
	}
	return strings.Join(keep, " ")
}

// completeContexts offers the contexts of the kubeconfig the command line
// names, or of the default one.
func completeContexts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := cmd.Flags().Lookup("kubeconfig"); f != nil && f.Changed {
		rules.ExplicitPath = f.Value.String()
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// flagError names the commands a flag belongs to when it is given to
// another, and the flag meant when its name is misspelt.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return fmt.Errorf("%w (see gantry %s --help)", err, c.Name())
	}
	for _, in := range config.Inputs {
		if in.Name == name {
			if in.For == "" {
				return fmt.Errorf("--%s is not a flag: the %s is the first argument, as in gantry apply", name, name)
			}
			return fmt.Errorf("--%s is not a flag of %s; it is for %s", name, c.Name(), strings.Join(strings.Fields(in.For), ", "))
		}
	}
	if name == "dry-run" || strings.HasPrefix(name, "dry-run=") {
		// What kubectl users type first.
		return fmt.Errorf("gantry has no --dry-run: gantry diff shows what apply would change (every object dry-run on the server, prune included), gantry validate checks every object without writing, and validate --offline needs no cluster")
	}
	var flags []string
	c.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	if best := suggest.Closest(name, flags); best != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s? (see gantry %s --help)", name, best, c.Name())
	}
	return fmt.Errorf("unknown flag --%s (see gantry %s --help)", name, c.Name())
}

// usage is a command's usage: its line, examples, and its flags by group.
func usage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	width := helpWidth(w)
	for _, g := range config.Groups {
		set := pflag.NewFlagSet(g, pflag.ContinueOnError)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if v, ok := f.Value.(*inputValue); ok && v.in.Group == g {
				set.AddFlag(f)
			}
		})
		if set.HasFlags() {
			fmt.Fprintf(w, "\n%s flags:\n%s", g, set.FlagUsagesWrapped(width))
		}
	}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if v, ok := f.Value.(*inputValue); !ok || v.in.Group == "" {
			other.AddFlag(f)
		}
	})
	fmt.Fprintf(w, "\nOther flags:\n%s", other.FlagUsagesWrapped(width))
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(w, "\nEach flag is also the variable GANTRY_<NAME> and a GitHub Action input;\ndocs/reference.md says more of each.\n")
	}
	return nil
}

// helpWidth is the terminal's width when w is one, else 100 columns.
func helpWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 60 {
			return min(cols, 160)
		}
	}
	return 100
}

// Help is the help of a command ("" for gantry's own), as --help prints it
// on a pipe.
func Help(command string) (string, error) {
	var out strings.Builder
	args := []string{"--help"}
	if command != "" {
		args = []string{command, "--help"}
	}
	_, err := parseCommandLine(args, nil, &out, &out)
	return out.String(), err
}

// errHelp says the command line asked for help, not for a run.
var errHelp = errors.New("help printed")

// noColorValue is --no-color: --color never, or with =false, auto.
type noColorValue struct{ v string }

func (n *noColorValue) String() string { return n.v }
func (n *noColorValue) Type() string   { return "bool" }
func (n *noColorValue) Set(s string) error {
	switch s {
	case "true", "":
		n.v = "never"
	case "false":
		n.v = "auto"
	default:
		return fmt.Errorf("%q is not true or false", s)
	}
	return nil
}
