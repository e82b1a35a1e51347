package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/onnxtest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/status"
	"github.com/cairnhq/cairn/stream"
)

// writeONNX writes raw into dir/name and returns the path and the file's hex SHA-256.
func writeONNX(t testing.TB, dir, name string, raw []byte) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return path, hex.EncodeToString(sum[:])
}

// embPoint is a tabular point of the embedding model: three numeric features and two
// codes, of tables of 5 and 4 rows.
func embPoint(r *rand.Rand) []float64 {
	return []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), float64(r.IntN(5)), float64(r.IntN(4))}
}

// TestONNXDaemon runs a daemon on the embedded broker with an ONNX backbone built in the
// test (an MLP over numeric features and embedding codes) and the kernel over its
// Linear layers only (model.params fc*): upserts with bad ones mixed in (a wrong length
// and codes outside their tables dead-lettered, wrong_dim and bad_index), the first fit,
// a query answered with the kernel's coverage, bad queries dead-lettered alike, and
// /status, GET /model and the UI stating the backbone (the file's SHA-256) and its
// coverage per tensor.
func TestONNXDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end daemon test")
	}
	dir := t.TempDir()
	path, sum := writeONNX(t, t.TempDir(), "emb.onnx", onnxtest.EmbeddingMLP(3, []int{5, 4}, 6, 2, 1))
	cfg := e2eConfig(dir)
	cfg.Model = config.Backbone{File: path, Params: []string{"fc*"}, Seed: 3}
	cfg.Sketch = config.Sketch{H: 2, S: 64}
	tp := cfg.Kafka.Topics
	r := startDaemon(t, cfg)

	const n = 80
	rng := rand.New(rand.NewPCG(9, 9))
	lim := stream.Limits{InputDim: 5}
	var msgs []stream.Message
	for i := range n {
		id, lab := fmt.Sprintf("e%03d", i), int64(i%2)
		v, err := stream.EncodeTrain(stream.TrainEvent{Op: stream.OpUpsert, ID: id, X: embPoint(rng), Label: &lab}, lim)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, stream.Message{Topic: tp.Train, Key: []byte(id), Value: v})
	}
	bad := []stream.Message{
		{Topic: tp.Train, Key: []byte("bad-len"), Value: []byte(`{"v":1,"op":"upsert","id":"bad-len","x":[0.1,0.2,0.3,1]}`)},
		{Topic: tp.Train, Key: []byte("bad-code"), Value: []byte(`{"v":1,"op":"upsert","id":"bad-code","x":[0.1,0.2,0.3,5,0]}`)},
		{Topic: tp.Train, Key: []byte("bad-frac"), Value: []byte(`{"v":1,"op":"upsert","id":"bad-frac","x":[0.1,0.2,0.3,1,2.5]}`)},
	}
	produceMsgs(t, r.d.Brokers(), slices.Concat(msgs[:40], bad, msgs[40:]))
	waitFor(t, "the first model on all points", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && s.ModelPoints == n && !s.RefitRunning
	})
	qs := []stream.Message{
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-x", X: []float64{0.3, -0.2, 1, 2, 3}, K: 5}, 5),
		{Topic: tp.Queries, Key: []byte("q-short"), Value: []byte(`{"v":1,"request":"q-short","x":[1,2,3]}`)},
		{Topic: tp.Queries, Key: []byte("q-code"), Value: []byte(`{"v":1,"request":"q-code","x":[1,2,3,4,-1]}`)},
	}
	produceMsgs(t, r.d.Brokers(), qs)
	waitFor(t, "an attribution and 5 dead letters", 30*time.Second, func() bool {
		return len(r.messages(tp.Attributions)) == 1 && len(r.messages(tp.DLQ)) == 5
	})
	var reasons []string
	for _, m := range r.messages(tp.DLQ) {
		var dl stream.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, dl.Topic+":"+string(dl.Reason))
	}
	slices.Sort(reasons)
	if want := []string{"cairn.queries:bad_index", "cairn.queries:wrong_dim", "cairn.train:bad_index", "cairn.train:bad_index", "cairn.train:wrong_dim"}; !slices.Equal(reasons, want) {
		t.Errorf("dead letters %v, want %v", reasons, want)
	}
	// fc1 (6×9 + 6) and fc2 (2×6 + 2) of 101 parameters, the two tables (5×3, 4×3) left out.
	const kernel, total = 74, 101
	a := keyed[stream.Attribution](t, r, tp.Attributions)["q-x"]
	if c := a.Coverage; c == nil || c.ParamsInKernel != kernel || c.ParamsTotal != total || math.Abs(c.Share-float64(kernel)/total) > 1e-15 {
		t.Errorf("attribution coverage %+v, want %d of %d", c, kernel, total)
	}
	if len(a.TopK) != 5 || a.Verdict == "" {
		t.Errorf("attribution %+v", a)
	}
	checkONNXSurfaces(t, r, path, sum, kernel, total)
}

// checkONNXSurfaces checks that /status, GET /model and the UI name the ONNX file and
// state its coverage.
func checkONNXSurfaces(t *testing.T, r *running, path, sum string, kernel, total int) {
	t.Helper()
	get := func(p string) string {
		resp, err := http.Get("http://" + r.d.HTTPAddr() + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, b)
		}
		return string(b)
	}
	var st StatusReport
	if err := json.Unmarshal([]byte(get("/status")), &st); err != nil {
		t.Fatal(err)
	}
	b := st.Backbone
	if b == nil || b.Arch != "onnx:"+sum || b.Weights != path || b.WeightsSHA256 != sum || !slices.Equal(b.InputShape, []int{5}) ||
		b.ParamsInKernel != kernel || b.ParamsTotal != total {
		t.Errorf("/status backbone %+v, want onnx:%s from %s, input [5], %d of %d parameters", b, sum, path, kernel, total)
	}
	var ex serving.ModelExport
	if err := json.Unmarshal([]byte(get("/model")), &ex); err != nil {
		t.Fatal(err)
	}
	if ex.Arch != "onnx:"+sum || ex.WeightsSHA256 != sum || ex.Coverage == nil || ex.Coverage.ParamsInKernel != kernel {
		t.Fatalf("/model names %s (%s), coverage %+v", ex.Arch, ex.WeightsSHA256, ex.Coverage)
	}
	in := map[string]serving.ExportedTensor{}
	for _, tc := range ex.Coverage.Tensors {
		in[tc.Name] = tc
	}
	if e, f := in["emb.0.weight"], in["fc1.weight"]; e.InKernel || !e.Parameter || e.Offset != -1 || !f.InKernel || f.Offset != 0 ||
		!slices.Equal(f.Shape, []int{6, 9}) {
		t.Errorf("/model tensors: emb.0.weight %+v, fc1.weight %+v", e, f)
	}
	if ov := get("/ui/"); !strings.Contains(ov, fmt.Sprintf("kernel over <b>%d</b> of %d parameters", kernel, total)) {
		t.Errorf("the UI overview does not state the coverage")
	}
}

// TestONNXLogsWarnings: the daemon logs the backbone, each of the loader's warnings with
// its fix (here a folded-BatchNorm export it was told to accept), and says when the
// pool's exact rows do not fit query.exact_memory_bytes.
func TestONNXLogsWarnings(t *testing.T) {
	path, _ := writeONNX(t, t.TempDir(), "folded.onnx", onnxtest.FoldedBatchNorm())
	f, err := pipeline.NewFeatures(config.Backbone{File: path, Seed: 1, AllowFoldedBatchNorm: true}, config.Sketch{H: 1, S: 8}, "")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg := config.Default()
	cfg.Query.ExactMemoryBytes = 1000 // the rows of 512 landmarks take 512·ExactDim·4 bytes
	cfg.Query.ExactDiskBytes = 1000
	status.LogBackbone(zerolog.New(&buf), f, cfg)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 || lines[0]["message"] != "backbone" || lines[1]["level"] != "warn" || lines[1]["kind"] != "folded-batchnorm" ||
		!strings.Contains(fmt.Sprint(lines[1]["fix"]), "do_constant_folding=False") || lines[2]["level"] != "warn" ||
		!strings.Contains(fmt.Sprint(lines[2]["message"]), "query.exact_memory_bytes") || lines[2]["exact_rows_bytes"] != float64(512*entk.ExactDim(f.Backbone())*4) {
		t.Errorf("log lines %v", lines)
	}
}

// TestONNXRefusedAtNew: cairnd refuses a folded-BatchNorm export before it opens
// anything, saying how to fix the export or accept it; with the opt-in it starts.
func TestONNXRefusedAtNew(t *testing.T) {
	path, _ := writeONNX(t, t.TempDir(), "folded.onnx", onnxtest.FoldedBatchNorm())
	cfg := e2eConfig(t.TempDir())
	cfg.Model = config.Backbone{File: path, Seed: 1}
	cfg.Sketch.S = 16 // P = 29
	if _, err := New(cfg, testLogger(t)); !errors.Is(err, pipeline.ErrFoldedBatchNorm) || !strings.Contains(err.Error(), "model.allow_folded_batchnorm") {
		t.Errorf("New with a folded export: %v", err)
	}
	cfg.Model.AllowFoldedBatchNorm = true
	if _, err := New(cfg, testLogger(t)); err != nil {
		t.Errorf("New with a folded export allowed: %v", err)
	}
}

// TestONNXConvNetSameAnswers: the built-in convnet with the shipped MNIST weights and
// its ONNX exports serve the same answers: the Go export (onnxtest.Export) and, when
// entk/onnx/testdata has it, PyTorch's (scripts/onnx-reference). Daemons fed the same
// points answer the same queries with the same top-K landmarks and verdicts, scores
// within 1e-5 relative
// (the two engines' ψ agree to about 1e-12 before the float32 rounding of the stored
// features, so a stored feature differs by at most one float32 ulp, 6e-8 relative, and
// the fit and the exact rows carry that along).
func TestONNXConvNetSameAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end daemon test")
	}
	const n = 120
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	test, err := dataset.Open("mnist", "test", 3)
	if err != nil {
		t.Fatal(err)
	}
	base := func(dir string) config.Config {
		c := e2eConfig(dir)
		c.Model = config.Backbone{Arch: "convnet:1x28x28-16-32-10", Seed: 3}
		return c
	}
	builtin, err := pipeline.NewFeatures(base("").Model, base("").Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := writeONNX(t, t.TempDir(), "convnet.onnx", onnxtest.Export(builtin.Backbone()))
	files := map[string]string{"built-in": "", "go-export": path}
	if torch := filepath.Join("..", "entk", "onnx", "testdata", "convnet.onnx"); fileExists(torch) {
		files["torch-export"] = torch
	}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	answers := map[string]map[string]stream.Attribution{}
	for kind, file := range files {
		cfg := base(t.TempDir())
		if file != "" {
			cfg.Model = config.Backbone{File: file, Seed: 3}
		}
		r := startDaemon(t, cfg)
		produceMsgs(t, r.d.Brokers(), upserts(t, cfg.Kafka.Topics.Train, set, rows))
		waitFor(t, kind+": the first model on all points", 180*time.Second, func() bool {
			s := r.d.Status()
			return s.Model > 0 && s.ModelPoints == n && !s.RefitRunning
		})
		answers[kind] = map[string]stream.Attribution{}
		for i := range test.N {
			q := stream.QueryEvent{Request: fmt.Sprintf("q%d", i), X: test.Row(i)}
			a, err := r.d.Answer(q)
			if err != nil {
				t.Fatal(err)
			}
			answers[kind][q.Request] = a
		}
		r.stop(t)
	}
	for kind := range files {
		if kind != "built-in" {
			sameAnswers(t, kind, answers[kind], answers["built-in"])
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sameAnswers checks that the answers of the export kind equal the built-in ones: same
// verdicts, top-K ids and views, scores within 1e-5 relative, and full coverage.
func sameAnswers(t *testing.T, kind string, got, want map[string]stream.Attribution) {
	t.Helper()
	for req, w := range want {
		g := got[req]
		if g.Verdict != w.Verdict || len(g.TopK) != len(w.TopK) || g.Coverage == nil || g.Coverage.Share != 1 {
			t.Errorf("%s %s: %s with %d, built-in %s with %d (coverage %+v)", kind, req, g.Verdict, len(g.TopK), w.Verdict, len(w.TopK), g.Coverage)
			continue
		}
		t.Logf("%s %s: %s, top %s %.6g (built-in %s %.6g)", kind, req, g.Verdict, g.TopK[0].ID, g.TopK[0].Score, w.TopK[0].ID, w.TopK[0].Score)
		for i, e := range w.TopK {
			if a := g.TopK[i]; a.ID != e.ID || a.View != e.View || math.Abs(a.Score-e.Score) > 1e-5*math.Abs(e.Score) {
				t.Errorf("%s %s top %d: %+v, built-in %+v", kind, req, i, a, e)
			}
		}
	}
}
