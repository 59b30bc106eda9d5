// Command stages writes the kwok Stage objects that the local test cluster
// needs (nodes become Ready and keep a heartbeat, pods become Ready, deleted
// pods go away) as one YAML stream, taken from the kwok module itself so they
// always match the pinned kwok version. A pod becomes Ready only once the
// cluster's config check (e2e/cluster/kubelet.go) found the ConfigMaps and
// Secrets it uses, as a kubelet starts a container only then.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// configChecked holds a pod back until the config check has found what
// it uses.
const configChecked = `    - key: '.metadata.annotations["gantry.dev/config-check"]'
      operator: 'In'
      values:
      - 'found'
`

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
	const selector = "  selector:\n    matchExpressions:\n"
	ready := docs[2]
	if !strings.Contains(ready, "name: pod-ready") || !strings.Contains(ready, selector) {
		fmt.Fprintln(os.Stderr, "kwok's pod-ready stage has changed shape: its selector cannot be extended")
		os.Exit(1)
	}
	docs[2] = strings.Replace(ready, selector, selector+configChecked, 1)
	if _, err := fmt.Println(strings.Join(docs, "\n---\n")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
