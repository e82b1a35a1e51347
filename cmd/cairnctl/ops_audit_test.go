package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/storage"
)

// TestAuditVerifyDataDir runs `audit verify --data-dir` on a stopped daemon's file: the
// contract's keys with the chain's head and count; a file held open (as by a running
// daemon) is refused saying so and what to do instead; a directory without the file
// names --data-dir. (The chain rules are package client's tests.)
func TestAuditVerifyDataDir(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(filepath.Join(dir, daemon.StateFile), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var head string
	for i := 1; i <= 3; i++ {
		if err := st.Apply(func(tx *storage.Tx) error {
			l, err := tx.AppendAudit(fmt.Appendf(nil, `{"request":"r%d","id":"p%d"}`, i, i))
			head = fmt.Sprintf("%x", l.Hash)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := runCmd("audit", "verify", "--data-dir", dir)
	if code != 1 || !strings.Contains(errs, "daemon running") || !strings.Contains(errs, "verify through Kafka without --data-dir") {
		t.Errorf("audit verify of a held file: exit %d, stderr %q; want a refusal naming the running daemon", code, errs)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd("audit", "verify", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, `"records": 3`) || !strings.Contains(out, head) || !strings.Contains(out, `"source": "store:`) {
		t.Errorf("audit verify --data-dir: exit %d, out %s, stderr %s; want 3 records with head %s", code, out, errs, head)
	}
	checkKeys(t, "audit verify --data-dir", out, chainReportKeys)
	if code, _, errs := runCmd("audit", "verify", "--data-dir", filepath.Join(dir, "nope")); code != 1 || !strings.Contains(errs, "--data-dir") {
		t.Errorf("audit verify of a missing directory: exit %d, stderr %q; want one naming --data-dir", code, errs)
	}
}
