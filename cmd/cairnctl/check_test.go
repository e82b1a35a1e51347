package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/storage"
)

// TestCheck runs `cairnctl check` on a healthy store, on corpus files damaged in a way
// that still opens (a redirected branch pointer) and that does not (a truncation), and
// on a store a process holds: ok true and exit 0 for the first, ok false with the
// problems and exit 1 for the damaged ones, and an error naming the running daemon for
// the held one. The checked files are never modified.
func TestCheck(t *testing.T) {
	healthy := t.TempDir()
	st, err := storage.Open(filepath.Join(healthy, daemon.StateFile), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(func(tx *storage.Tx) error { return tx.PutPoint(storage.Point{ID: "a", X: []float64{1, 2}}) }); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd("check", "--data-dir", healthy, "--timeout", "100ms")
	if code != 1 || !strings.Contains(errOut, "running daemon") {
		t.Errorf("check of a held file: exit %d, stderr %q; want 1 naming the running daemon", code, errOut)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, corpus string
		wantOK       bool
		wantProblem  string
	}{
		{"healthy", "", true, ""},
		{"redirected pointer", "branch-child-pointer", false, "multiple references"},
		{"truncated", "truncated-half", false, "truncated"},
	} {
		dir := healthy
		if tc.corpus != "" {
			dir = t.TempDir()
			img, err := os.ReadFile(filepath.Join("../../storage/testdata/damaged", tc.corpus+".db"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, daemon.StateFile), img, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := os.ReadFile(filepath.Join(dir, daemon.StateFile))
		code, out, errOut := runCmd("check", "--data-dir", dir)
		var rep storage.CheckReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: output %q: %v (stderr %q)", tc.name, out, err, errOut)
		}
		if rep.OK != tc.wantOK || (code == 0) != tc.wantOK {
			t.Errorf("%s: ok %v exit %d, want ok %v", tc.name, rep.OK, code, tc.wantOK)
		}
		if tc.wantProblem != "" && (len(rep.Problems) == 0 || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.wantProblem)) {
			t.Errorf("%s: problems %q, want one mentioning %q", tc.name, rep.Problems, tc.wantProblem)
		}
		if tc.wantOK && (rep.Keys["points"] != 1 || rep.Format != storage.FormatVersion) {
			t.Errorf("%s: report %+v", tc.name, rep)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, daemon.StateFile)); string(after) != string(before) {
			t.Errorf("%s: check modified the file", tc.name)
		}
	}
	if code, _, _ := runCmd("check"); code == 0 {
		t.Error("check without --data-dir succeeded")
	}
}
