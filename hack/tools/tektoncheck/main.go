// Command tektoncheck decodes Tekton Task files strictly into Tekton's own
// Go types and runs Tekton's validation on them, the way the Tekton
// controller's webhook would. It lives in its own module so Tekton's
// dependency pins never touch gantry's.
package main

import (
	"context"
	"fmt"
	"os"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: valid\n", path)
	}
	if failed || len(os.Args) < 2 {
		os.Exit(1)
	}
}

func check(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var task pipelinev1.Task
	if err := yaml.UnmarshalStrict(b, &task); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	ctx := context.Background()
	task.SetDefaults(ctx)
	if err := task.Validate(ctx); err != nil {
		return fmt.Errorf("validation: %w", err)
	}
	return nil
}
