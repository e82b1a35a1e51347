package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
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

// chainReportKeys are the keys of `cairnctl audit verify`, from Kafka or a file.
var chainReportKeys = []string{"duplicates", "first_bad_seq", "forged", "from_checkpoint", "head", "ok", "reason", "records", "signatures", "source"}

// checkKeys checks that out is one JSON object with exactly the keys want (sorted).
func checkKeys(t *testing.T, what, out string, want []string) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Errorf("%s: output %q is not one JSON object: %v", what, out, err)
		return
	}
	if got := slices.Sorted(maps.Keys(top)); !slices.Equal(got, want) {
		t.Errorf("%s: keys %v, want %v", what, got, want)
	}
}
