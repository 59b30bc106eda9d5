// Command gendocs writes the inputs of action.yml and the README's input
// table from the entrypoint's input table, so the three never disagree.
// Run it with `make docs`; entrypoint's tests fail when they do.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gantry-dev/gantry/entrypoint"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run() error {
	if err := replace("action.yml", "inputs:\n", "outputs:\n", actionInputs()); err != nil {
		return err
	}
	return replace("README.md", "| input | default | what it does |\n", "\n\n", readmeTable())
}

// replace swaps the text from the line start up to (not including) end.
func replace(path, start, end, with string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, start)
	if i < 0 {
		return fmt.Errorf("%s: %q not found", path, start)
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		return fmt.Errorf("%s: %q not found after %q", path, end, start)
	}
	return os.WriteFile(path, []byte(s[:i]+with+s[i+j:]), 0o644)
}

func actionInputs() string {
	var b strings.Builder
	b.WriteString("inputs:\n")
	for _, in := range entrypoint.Inputs {
		fmt.Fprintf(&b, "  %s:\n    description: %s\n    required: false\n", in.Name, strconv.Quote(in.Description))
		d := in.Default
		if in.ActionDefault != "" {
			d = in.ActionDefault
		}
		if d != "" {
			fmt.Fprintf(&b, "    default: %s\n", strconv.Quote(d))
		}
	}
	return b.String()
}

func readmeTable() string {
	var b strings.Builder
	b.WriteString("| input | default | what it does |\n|---|---|---|\n")
	for _, in := range entrypoint.Inputs {
		d := " "
		if in.Default != "" {
			d = "`" + in.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", in.Name, d, strings.ReplaceAll(in.Description, "|", "\\|"))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
