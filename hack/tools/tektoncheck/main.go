// Command tektoncheck decodes Tekton Task, Pipeline and PipelineRun files strictly into
// Tekton's own Go types and runs Tekton's validation on them, the way the Tekton
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
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	ctx := context.Background()
	switch meta.Kind {
	case "Task":
		var task pipelinev1.Task
		if err := yaml.UnmarshalStrict(b, &task); err != nil {
			return fmt.Errorf("decoding: %w", err)
		}
		task.SetDefaults(ctx)
		if err := task.Validate(ctx); err != nil {
			return fmt.Errorf("validation: %w", err)
		}
	case "Pipeline":
		var pipeline pipelinev1.Pipeline
		if err := yaml.UnmarshalStrict(b, &pipeline); err != nil {
			return fmt.Errorf("decoding: %w", err)
		}
		pipeline.SetDefaults(ctx)
		if err := pipeline.Validate(ctx); err != nil {
			return fmt.Errorf("validation: %w", err)
		}
	case "PipelineRun":
		var run pipelinev1.PipelineRun
		if err := yaml.UnmarshalStrict(b, &run); err != nil {
			return fmt.Errorf("decoding: %w", err)
		}
		run.SetDefaults(ctx)
		if err := run.Validate(ctx); err != nil {
			return fmt.Errorf("validation: %w", err)
		}
	default:
		return fmt.Errorf("kind %q: want a Task, a Pipeline or a PipelineRun", meta.Kind)
	}
	return nil
}
