package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/storage"
)

// TestDamagedStateRefused: a state file damaged in a way that still reads (a branch
// page's child pointer redirected; storage/testdata/damaged) stops the daemon at start
// with an error matching storage.ErrDamaged, with check_on_start (before anything is
// written) and without it (the restore fails, and the full check it then runs names the
// damage). The healthy file it was damaged from fails the restore too (its points are
// not this backbone's), but is not called damaged.
func TestDamagedStateRefused(t *testing.T) {
	for _, c := range []struct {
		file        string
		check       bool
		wantDamaged bool
	}{
		{"branch-child-pointer", true, true},
		{"branch-child-pointer", false, true},
		{"base", true, false},
		{"base", false, false},
	} {
		dir := t.TempDir()
		img, err := os.ReadFile(filepath.Join("../storage/testdata/damaged", c.file+".db"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, StateFile), img, 0o600); err != nil {
			t.Fatal(err)
		}
		// The corpus files share their base's slot files (storage/testdata/damaged).
		slots := filepath.Join(dir, StateFile+".slots")
		if err := os.MkdirAll(slots, 0o700); err != nil {
			t.Fatal(err)
		}
		es, err := os.ReadDir("../storage/testdata/damaged/base.db.slots")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			b, err := os.ReadFile(filepath.Join("../storage/testdata/damaged/base.db.slots", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(slots, e.Name()), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg := e2eConfig(dir)
		cfg.CheckOnStart = c.check
		d, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = d.Run(ctx)
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s check_on_start=%v: Run returned %v, want a refusal", c.file, c.check, err)
		}
		t.Logf("%s check_on_start=%v: %v", c.file, c.check, err)
		if got := errors.Is(err, storage.ErrDamaged); got != c.wantDamaged {
			t.Errorf("%s check_on_start=%v: %v; damaged %v, want %v", c.file, c.check, err, got, c.wantDamaged)
		}
		if c.wantDamaged && !strings.Contains(err.Error(), "cairnctl check") {
			t.Errorf("%s: %v does not say how to list the problems", c.file, err)
		}
	}
}
