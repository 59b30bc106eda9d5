// Command stages writes the kwok Stage objects that the local test cluster
// needs (nodes become Ready and keep a heartbeat, pods become Ready, deleted
// pods go away) as one YAML stream, taken from the kwok module itself so they
// always match the pinned kwok version.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i := range docs {
		docs[i] = strings.TrimSpace(docs[i])
	}
	if _, err := fmt.Println(strings.Join(docs, "\n---\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
