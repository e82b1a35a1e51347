package gcpace

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestSet: without GOGC in the environment Set makes the target Percent; with GOGC set
// it leaves the runtime's setting alone.
func TestSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "") // registers the restore of the variable
	os.Unsetenv("GOGC")
	debug.SetGCPercent(100)
	Set()
	if got := debug.SetGCPercent(100); got != Percent {
		t.Fatalf("without GOGC: target %d, want %d", got, Percent)
	}
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	Set()
	if got := debug.SetGCPercent(100); got != 80 {
		t.Fatalf("with GOGC=80: target %d, want 80 left alone", got)
	}
}
