// Command cairnd is the cairn daemon. It is built in the daemon issue; until then it only
// reports that it does not exist yet.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "cairnd: the daemon is not implemented yet; see README.md")
	os.Exit(1)
}
