// Command memhog allocates memory and touches every page of it, a mebibyte
// at a time, until the kernel kills it: the container that the end-to-end
// tests of the real node run to meet an OOM kill.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	var held [][]byte
	for i := 1; ; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(j)
		}
		held = append(held, b)
		if i%16 == 0 {
			fmt.Fprintf(os.Stdout, "holding %d MiB\n", i)
			time.Sleep(10 * time.Millisecond)
		}
	}
}
