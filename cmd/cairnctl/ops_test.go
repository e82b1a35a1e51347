package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestOperatorConnectionFlags checks the operator contract that scripts rely on: every
// command talking to a daemon or a broker accepts --brokers, --http and --config.
func TestOperatorConnectionFlags(t *testing.T) {
	for _, c := range []string{"produce", "query", "delete", "status", "audit verify", "model export"} {
		args := append(strings.Fields(c), "--brokers", "127.0.0.1:1", "--http", "127.0.0.1:1", "--config", "", "-h")
		if got := run(context.Background(), args, nil, io.Discard, io.Discard); got != 0 {
			t.Errorf("cairnctl %s --brokers --http --config -h: exit %d, want 0", c, got)
		}
	}
}
