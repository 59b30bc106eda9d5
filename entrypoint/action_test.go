package entrypoint

import (
	"os"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/reporters"
)

// action.yml and the input table must agree: the same inputs, the same
// defaults, the same descriptions.
func TestActionYAMLMatchesInputs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct {
			Description string  `json:"description"`
			Default     *string `json:"default"`
		} `json:"inputs"`
	}
	if err := yaml.Unmarshal(b, &action); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	got := map[string][2]string{}
	for name, in := range action.Inputs {
		d := ""
		if in.Default != nil {
			d = *in.Default
		}
		got[name] = [2]string{d, in.Description}
	}
	want := map[string][2]string{}
	for _, in := range config.Inputs {
		d := in.Default
		if in.ActionDefault != "" {
			d = in.ActionDefault
		}
		want[in.Name] = [2]string{d, in.Description}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("action.yml inputs differ from the entrypoint's table (-table +action.yml):\n%s", diff)
	}
}

// action.yml declares exactly the outputs gantry writes.
func TestActionYAMLOutputs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Outputs map[string]struct {
			Description string `json:"description"`
		} `json:"outputs"`
	}
	if err := yaml.Unmarshal(b, &action); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name, o := range action.Outputs {
		if o.Description == "" {
			t.Errorf("output %s has no description", name)
		}
		got = append(got, name)
	}
	want := reporters.OutputNames()
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("action.yml outputs (-written +declared):\n%s", diff)
	}
}
