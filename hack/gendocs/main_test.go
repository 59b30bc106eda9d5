package main

import (
	"os"
	"testing"
)

// docs/reference.md is what make docs writes.
func TestReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Reference() {
		t.Error("docs/reference.md is stale: run make docs")
	}
}

// docs/cli.md is what make docs writes.
func TestCLIIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := CLI()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Error("docs/cli.md is stale: run make docs")
	}
}
