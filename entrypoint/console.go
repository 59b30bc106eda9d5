package entrypoint

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/result"
)

// console prints progress for a person: one line per stage, one line per
// object that changed, and a summary. Secret values are masked in every
// line, whatever produced it.
type console struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
}

var _ pipeline.Observer = (*console)(nil)

func newConsole(w io.Writer, secrets []string) *console {
	return &console{w: w, secrets: secrets}
}

func (c *console) printf(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	for _, v := range c.secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "***")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprint(c.w, s)
}

func (c *console) StageStarted(name string) { c.printf("▸ %s\n", name) }

func (c *console) StageFinished(s result.Stage) {
	if s.Error != "" {
		c.printf("✗ %s failed after %s\n", s.Name, s.Duration.Round(msRound))
		return
	}
	c.printf("✓ %s (%s)\n", s.Name, s.Duration.Round(msRound))
}

func (c *console) ObjectDone(o result.Object) {
	if o.Action == result.Unchanged {
		return
	}
	line := fmt.Sprintf("  %s %s", o.Ref(), o.Action)
	if o.Error != "" {
		line += ": " + o.Error
	}
	c.printf("%s\n", line)
}

func (c *console) Info(msg string) { c.printf("  %s\n", msg) }

// summary prints the outcome, counts and, on failure, every error.
func (c *console) summary(res *result.Result) {
	counts := res.Counts()
	var parts []string
	for _, a := range result.Actions {
		parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
	}
	where := ""
	if res.Inventory != nil && res.Inventory.Name != "" {
		where = fmt.Sprintf(" (inventory %s/%s", res.Inventory.Namespace, res.Inventory.Name)
		if res.Revision != "" {
			where += ", revision " + res.Revision
		}
		where += ")"
	}
	c.printf("gantry %s: %s: %s%s\n", res.Command, res.Reason, strings.Join(parts, ", "), where)
	if res.Message != "" && !res.Succeeded() {
		c.printf("%s\n", indent(res.Message))
	}
}

const msRound = 1e6 // time.Millisecond, untyped for Round

// writeObjects prints the built objects as a YAML stream, with the values
// of Secrets redacted: build output ends up in CI logs.
func writeObjects(w io.Writer, objects []*pipeline.Object) error {
	for i, o := range objects {
		u := o.Unstructured
		if u.GetKind() == "Secret" && u.GroupVersionKind().Group == "" {
			u = redactSecret(u)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func redactSecret(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	for _, field := range []string{"data", "stringData"} {
		m, ok, _ := unstructured.NestedMap(c.Object, field)
		if !ok {
			continue
		}
		for k := range m {
			m[k] = "*** (redacted)"
		}
		_ = unstructured.SetNestedMap(c.Object, m, field)
	}
	return c
}

// runInventory lists the inventories of a namespace, or shows one.
func runInventory(ctx context.Context, cfg *Config, connect pipeline.Connector, stdout, stderr io.Writer) int {
	clients, err := connect()
	if err != nil {
		fmt.Fprintln(stderr, "gantry:", err)
		return ExitFailed
	}
	store := &inventory.Store{Client: clients.Kube}
	if cfg.Inventory == "" {
		invs, err := store.List(ctx, cfg.InventoryNamespace)
		if err != nil {
			fmt.Fprintln(stderr, "gantry:", err)
		}
		for _, inv := range invs {
			fmt.Fprintf(stdout, "%s/%s\t%d objects\trevision %s\tapplied %s\n", inv.Namespace, inv.Name, len(inv.Entries), orNone(inv.Revision), inv.LastApplied.Format("2006-01-02T15:04:05Z07:00"))
		}
		if err != nil {
			return ExitFailed
		}
		return ExitOK
	}
	inv, err := store.Load(ctx, cfg.InventoryNamespace, cfg.Inventory)
	if err != nil {
		fmt.Fprintln(stderr, "gantry:", err)
		return ExitFailed
	}
	if !inv.Exists() {
		fmt.Fprintf(stderr, "gantry: inventory %s/%s not found\n", cfg.InventoryNamespace, cfg.Inventory)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "inventory %s/%s: revision %s, source %s, applied %s by gantry %s\n", inv.Namespace, inv.Name, orNone(inv.Revision), inv.Source, inv.LastApplied.Format("2006-01-02T15:04:05Z07:00"), inv.GantryVersion)
	for _, e := range inv.Entries {
		fmt.Fprintf(stdout, "%s\t%s\n", e.ID, e.Version)
	}
	return ExitOK
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
