package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/lab/demo"
	"github.com/cairnhq/cairn/storage"
)

// modelExportKeys are the keys of cairnctl model export and GET /model of a fitted model
// (bias and coefficients: the encoder, which a representer answer needs; coverage: the
// backbone's parameters the kernel is over, every tensor for a built-in backbone).
var (
	modelExportKeys = []string{"arch", "bias", "coverage", "kernel_scale", "landmarks", "model", "model_id", "score", "weights", "weights_sha256"}
	landmarkKeys    = []string{"coefficients", "id", "omega", "view", "x"}
)

// TestModelExportDataDir runs the demo (a daemon on 120 MNIST points, queries, the
// deletion of the first answer's top landmark and its refit) in a kept directory, then
// exports the stopped daemon's models with --data-dir: the keys are the contract's, the
// newest model is the demo's last, and neither it nor the model the deleted point was a
// landmark of (--model 1) lists the deleted point, while the other landmarks of model 1
// are all there. A configuration of another model is refused, as is an unknown version.
func TestModelExportDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.Query.Score = "entk" // the demo deletes its answer's top-1: a landmark under entk
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := demo.Run(ctx, demo.Options{Config: cfg, DataDir: dir, Data: "mnist", N: 120, Queries: 1, Log: zerolog.Nop(), Stderr: io.Discard}, &out); err != nil {
		if strings.Contains(err.Error(), "mnist") {
			t.Skipf("MNIST not available: %v", err)
		}
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var sum demo.Summary
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l demoLineIn
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Event == "summary" {
			if err := json.Unmarshal(l.Data, &sum); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sum.Deleted == "" || sum.Model < 2 {
		t.Fatalf("demo summary %+v: want a deleted landmark and a refit after it", sum)
	}
	// The daemon's configuration, as its operator would pass it.
	conf := filepath.Join(t.TempDir(), "cairnd.yaml")
	yaml := "model: {arch: \"mlp:784-32-10\", seed: 3, view_seed: 3, untrained: true}\nsketch: {h: 2, s: 128}\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	newest := exportCmd(t, "--data-dir", dir, "--config", conf)
	if newest.Model != sum.Model || newest.Weights != "seeded:3" || newest.Arch != cfg.Model.Arch {
		t.Errorf("newest export: model %d weights %q arch %q, want %d seeded:3 %s", newest.Model, newest.Weights, newest.Arch, sum.Model, cfg.Model.Arch)
	}
	first := exportCmd(t, "--data-dir", dir, "--config", conf, "--model", "1")
	stored := storedLandmarks(t, filepath.Join(dir, daemon.StateFile), 1)
	if !slices.Contains(stored, sum.Deleted) {
		t.Fatalf("model 1 does not have the deleted point %s as a landmark: the demo deleted another", sum.Deleted)
	}
	want := slices.DeleteFunc(slices.Clone(stored), func(id string) bool { return id == sum.Deleted })
	for name, e := range map[string]exportOut{"newest": newest, "model 1": first} {
		var ids []string
		for _, l := range e.Landmarks {
			ids = append(ids, l.ID)
			if len(l.X) != 784 || !(l.Omega > 0) || (l.View != "A" && l.View != "B") {
				t.Errorf("%s: landmark %s has %d inputs, ω %v, view %q", name, l.ID, len(l.X), l.Omega, l.View)
			}
		}
		if slices.Contains(ids, sum.Deleted) {
			t.Errorf("%s export lists the deleted point %s", name, sum.Deleted)
		}
		if name == "model 1" && !slices.Equal(ids, want) {
			t.Errorf("model 1 exports %v, want the stored landmarks without %s: %v", ids, sum.Deleted, want)
		}
	}

	// The default configuration is the trained convnet, not the daemon's model.
	if code, _, stderr := runCmd("model", "export", "--data-dir", dir); code == 0 || !strings.Contains(stderr, "fingerprint") {
		t.Errorf("export under another configuration: exit %d, stderr %q; want a refusal naming the fingerprint", code, stderr)
	}
	if code, _, stderr := runCmd("model", "export", "--data-dir", dir, "--config", conf, "--model", "99"); code == 0 || !strings.Contains(stderr, "99") {
		t.Errorf("--model 99: exit %d, stderr %q; want an error naming it", code, stderr)
	}
	if code, _, stderr := runCmd("model", "export", "--data-dir", filepath.Join(dir, "nope")); code == 0 || !strings.Contains(stderr, "--data-dir") {
		t.Errorf("missing directory: exit %d, stderr %q", code, stderr)
	}
}

// TestModelExportHTTP checks the HTTP form against a stand-in daemon: the URL with and
// without --model, the body printed as received, and a non-200 answer as an error.
func TestModelExportHTTP(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.RequestURI())
		if r.URL.Query().Get("model") == "7" {
			http.Error(w, "daemon: no such model version: 7", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":3,"model_id":"sha256:ab","arch":"mlp:2-3-1","weights":"seeded:1","weights_sha256":"cd","kernel_scale":0.5,"score":"s","landmarks":[{"id":"p","view":"A","x":[1,2],"omega":0.25,"coefficients":[0.5]}],"bias":[0.1],`+
			`"coverage":{"params_in_kernel":13,"params_total":13,"share":1,"tensors":[]}}`)
	}))
	defer srv.Close()
	code, stdout, stderr := runCmd("model", "export", "--http", srv.URL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkExportKeys(t, stdout)
	if code, _, stderr := runCmd("model", "export", "--http", srv.URL, "--model", "7"); code == 0 || !strings.Contains(stderr, "404") {
		t.Errorf("--model 7: exit %d, stderr %q; want the 404", code, stderr)
	}
	if want := []string{"/model", "/model?model=7"}; !slices.Equal(paths, want) {
		t.Errorf("requested %v, want %v", paths, want)
	}
}

type exportOut struct {
	Model     uint64 `json:"model"`
	Arch      string `json:"arch"`
	Weights   string `json:"weights"`
	Landmarks []struct {
		ID    string    `json:"id"`
		View  string    `json:"view"`
		X     []float64 `json:"x"`
		Omega float64   `json:"omega"`
	} `json:"landmarks"`
}

// exportCmd runs cairnctl model export with args, checks the keys and decodes it.
func exportCmd(t *testing.T, args ...string) exportOut {
	t.Helper()
	code, stdout, stderr := runCmd(append([]string{"model", "export"}, args...)...)
	if code != 0 {
		t.Fatalf("model export %v: exit %d: %s", args, code, stderr)
	}
	checkExportKeys(t, stdout)
	var e exportOut
	if err := json.Unmarshal([]byte(stdout), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// checkExportKeys checks that out is one JSON object with exactly the contract's keys.
func checkExportKeys(t *testing.T, out string) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("output is not one JSON object: %v", err)
	}
	if got := slices.Sorted(maps.Keys(top)); !slices.Equal(got, modelExportKeys) {
		t.Errorf("keys %v, want %v", got, modelExportKeys)
	}
	var ls []map[string]json.RawMessage
	if err := json.Unmarshal(top["landmarks"], &ls); err != nil || len(ls) == 0 {
		t.Fatalf("landmarks %.200s: %v", top["landmarks"], err)
	}
	for _, l := range ls {
		if got := slices.Sorted(maps.Keys(l)); !slices.Equal(got, landmarkKeys) {
			t.Errorf("landmark keys %v, want %v", got, landmarkKeys)
		}
	}
}

// storedLandmarks reads model version's landmark ids from the file at path.
func storedLandmarks(t *testing.T, path string, version uint64) []string {
	t.Helper()
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var m storage.Model
	if err := st.View(func(tx *storage.ReadTx) error {
		var err error
		m, _, err = tx.Model(version)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m.Landmarks
}
