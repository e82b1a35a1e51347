// Package gcpace sets the garbage collector's pace for cairn's commands (cairnd and
// cairnctl, which hosts a daemon in bench, demo and bench-scale).
//
// # Contract
//
// Set lowers the collector's target from Go's default GOGC=100 to Percent unless the
// GOGC environment variable is set (then the runtime's reading of it stands; GOMEMLIMIT
// is honoured by the runtime either way). It is called once by a main, before any work;
// libraries never call it.
//
// Why: a daemon's heap is mostly long-lived, pointer-free memory, the point cache's
// float32 features and raw inputs (2.4 GB for full MNIST). The collector does not scan
// pointer-free memory, so a cycle costs little, but under GOGC=100 it lets garbage
// grow to the size of the whole live heap before collecting: the peak resident memory
// was twice the live heap (full MNIST: 6.4 GB of heap at a 3.3 GB live heap, the
// collector's next goal 6.7 GB). GOGC=25 sets the goal at 1.25 times the live heap; the
// measured peak resident memory went from 6.55 to 4.45 GB (docs/performance.md, "Full
// MNIST on one primary"; that run also dropped the bench client's copy of the training
// rows).
package gcpace

import (
	"os"
	"runtime/debug"
)

// Percent is the GOGC the commands run with unless the environment sets GOGC.
const Percent = 25

// Set applies Percent unless GOGC is set in the environment.
func Set() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(Percent)
	}
}
