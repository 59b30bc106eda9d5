// Command pause is the sandbox ("pause") container of the local test
// cluster's real node: it holds a pod's namespaces, reaps the zombies
// handed to it as process 1, and exits on SIGINT or SIGTERM. It is built
// statically and served by the cluster's own registry, so the node pulls
// nothing from outside.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
