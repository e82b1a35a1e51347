package main

import (
	"io"
	"strings"
	"testing"
)

// TestBenchByFlag: --by takes x, id or both, and a bad value is refused before the
// daemon starts, naming the flag and the value.
func TestBenchByFlag(t *testing.T) {
	err := cmdRun("bench", []string{"--by", "input"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--by "input"`) {
		t.Errorf("bench --by input: error %v, want one naming --by and the value", err)
	}
}
