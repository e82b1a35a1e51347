package daemon

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/entk/weights"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// TestModelExportKeys is the JSON contract of GET /model and cairnctl model export:
// exactly these keys, at the top level and per landmark.
func TestModelExportKeys(t *testing.T) {
	e, err := serving.NewExport(3, "sha256:00", "mlp:2-3-1", weights.Source{Weights: "seeded:1", SHA256: "ab"}, 0.5,
		[]string{"p1", "p2", "p3"}, []byte("ABA"), []float64{1, 2, 3, 4, 5, 6}, []bool{false, true, false}, []float64{7, 8, 9})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	want := []string{"arch", "kernel_scale", "landmarks", "model", "model_id", "score", "weights", "weights_sha256"}
	if got := sortedKeys(top); !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	var ls []map[string]json.RawMessage
	if err := json.Unmarshal(top["landmarks"], &ls); err != nil {
		t.Fatal(err)
	}
	// The masked landmark p2 is left out; p3 keeps its own input row and ω.
	if len(ls) != 2 || string(ls[1]["id"]) != `"p3"` || string(ls[1]["x"]) != "[5,6]" || string(ls[1]["omega"]) != "9" {
		t.Errorf("landmarks %s, want p1 and p3 with their rows", top["landmarks"])
	}
	for _, l := range ls {
		if got := sortedKeys(l); !slices.Equal(got, []string{"id", "omega", "view", "x"}) {
			t.Errorf("landmark keys %v, want [id omega view x]", got)
		}
	}
	if _, err := serving.NewExport(3, "", "", weights.Source{}, 1, []string{"p"}, []byte("A"), []float64{1}, []bool{true}, []float64{1}); !errors.Is(err, ErrNoModelExport) {
		t.Errorf("all masked: error %v, want ErrNoModelExport", err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestModelExportRecomputesAnswers starts a daemon on 120 MNIST points under each
// variance model and checks, from GET /model alone (plus, for a sketched answer, the
// draw's seed published on cairn.status), that every landmark's score for one query can
// be recomputed: the answer's top-K and runner-up scores match, and the top-K of the
// recomputed scores over all exported landmarks is the answer's. It then deletes the
// answer's first landmark and checks that neither the serving export nor the stored one
// (GET /model?model=V, and ExportStored on the stopped daemon's file) lists it.
func TestModelExportRecomputesAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	set, err := dataset.Open("mnist", "train", 120)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	test, err := dataset.Open("mnist", "test", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, variance string
		model          config.Backbone
	}{
		// The default trained convnet (shipped weights), exact eNTK rows.
		{"exact", certify.VarianceExactKernel, config.Backbone{Arch: "convnet:1x28x28-16-32-10", Seed: 3}},
		// The seeded network on the sketched path: exact rows off, and no exact rows for
		// crossing landmarks either (exact_rows_cap 0), so every score is the draw's.
		{"sketched", certify.VarianceConservative, config.Backbone{Arch: "mlp:784-32-10", Seed: 3, Untrained: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := e2eConfig(dir)
			cfg.Model = tc.model
			cfg.Refit.MinPoints = 60
			cfg.Query.DrawQueries = 1 // the second query retires the first answer's draw
			// The export holds the landmarks: a landmark ranking's answer is what it recomputes
			// (a gradient answer is recomputed from the stored points: bench's CheckAnswers).
			cfg.Query.Score = "entk"
			// The first fit once all points are in; afterwards only the deletion's
			// refit, late enough to see the masked serving model before it.
			cfg.Refit.PointsChanged, cfg.Refit.Idle = set.N, 0
			cfg.Refit.PoolChangeFraction, cfg.Refit.ResidualIncrease = 0, 0
			cfg.Refit.DeleteDebounce = time.Second
			if tc.variance == certify.VarianceConservative {
				cfg.Query.ExactMemoryBytes, cfg.Query.ExactRowsCap = 0, 0
			}
			tp := cfg.Kafka.Topics
			r := startDaemon(t, cfg)
			if code, body := httpGet(t, r.d.HTTPAddr(), "/model"); code != http.StatusServiceUnavailable {
				t.Errorf("GET /model before the first model: %d %s, want 503", code, body)
			}
			rows := make([]int, set.N)
			for i := range rows {
				rows[i] = i
			}
			produceMsgs(t, r.d.Brokers(), upserts(t, tp.Train, set, rows))
			waitFor(t, "the first model", 120*time.Second, func() bool {
				s := r.d.Status()
				return s.Model > 0 && s.ModelPoints == set.N && !s.RefitRunning
			})
			x := test.Row(0)
			produceMsgs(t, r.d.Brokers(), []stream.Message{
				queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q1", X: x, K: 5}, set.D)})
			waitFor(t, "the answer", 30*time.Second, func() bool { return len(r.messages(tp.Attributions)) == 1 })
			a := keyed[stream.Attribution](t, r, tp.Attributions)["q1"]
			if a.VarianceModel != tc.variance {
				t.Fatalf("variance model %q, want %q", a.VarianceModel, tc.variance)
			}

			code, body := httpGet(t, r.d.HTTPAddr(), "/model")
			if code != http.StatusOK {
				t.Fatalf("GET /model: %d %s", code, body)
			}
			var ex serving.ModelExport
			if err := json.Unmarshal(body, &ex); err != nil {
				t.Fatal(err)
			}
			if ex.Model != a.Model || ex.Arch != cfg.Model.Arch || ex.Score == "" || !(ex.KernelScale > 0) {
				t.Fatalf("export model %d arch %q kernel_scale %v, answer model %d, arch %q", ex.Model, ex.Arch, ex.KernelScale, a.Model, cfg.Model.Arch)
			}
			b := exportBackbone(t, ex)
			var kernel func(xl []float64) (k, bound float64)
			switch a.VarianceModel {
			case certify.VarianceExactKernel:
				ws := b.NewWorkspace()
				kernel = func(xl []float64) (float64, float64) { return entk.ExactKernel(b, xl, x, ws), 0 }
			default:
				// The seed is published when the draw retires: a second query needs a new draw.
				produceMsgs(t, r.d.Brokers(), []stream.Message{
					queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q2", X: x}, set.D)})
				var seed uint64
				waitFor(t, "the first draw's seed on cairn.status", 30*time.Second, func() bool {
					seed = publishedSeed(t, r, tp.Status, a.SeedHash)
					return seed != 0
				})
				// The new draw's model keeps the gradient rows: the gradient ranking is still
				// answered (a redraw once rebuilt the model without them).
				produceMsgs(t, r.d.Brokers(), []stream.Message{
					queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q3", X: x, Score: "gradient_cosine"}, set.D)})
				waitFor(t, "the gradient answer after the redraw", 30*time.Second, func() bool {
					_, ok := keyed[stream.Attribution](t, r, tp.Attributions)["q3"]
					return ok || len(r.messages(tp.DLQ)) > 0
				})
				if g, ok := keyed[stream.Attribution](t, r, tp.Attributions)["q3"]; !ok || g.Score != "gradient_cosine" {
					t.Fatalf("after a new draw a gradient_cosine query got %+v (dead letters: %d)", g, len(r.messages(tp.DLQ)))
				}
				sk, err := entk.NewSketch(b, a.Budget.Heads, a.Budget.SketchDim, seed, "eval")
				if err != nil {
					t.Fatal(err)
				}
				sws := sk.NewWorkspace()
				qf, lf := make([]float64, sk.Dim()), make([]float64, sk.Dim())
				sk.FeaturesTo(qf, x, sws)
				kernel = func(xl []float64) (float64, float64) {
					sk.FeaturesTo(lf, xl, sws)
					var k, nl, nq float64
					for j := range lf {
						k += lf[j] * qf[j]
						nl += lf[j] * lf[j]
						nq += qf[j] * qf[j]
					}
					return k, math.Sqrt(nl * nq)
				}
			}
			// Every landmark's score from the export alone.
			scores := make([]float64, len(ex.Landmarks))
			bounds := make([]float64, len(ex.Landmarks))
			index := map[string]int{}
			for i, l := range ex.Landmarks {
				k, bound := kernel(l.X)
				scores[i], bounds[i] = k, bound
				if a.Score == string(certify.Displacement) {
					scores[i], bounds[i] = k*l.Omega, bound*l.Omega
				}
				index[l.ID+"/"+l.View] = i
			}
			var extra struct {
				RunnerUp stream.Scored `json:"runner_up"`
			}
			if err := json.Unmarshal(a.Extra, &extra); err != nil {
				t.Fatal(err)
			}
			for _, e := range append(slices.Clone(a.TopK), extra.RunnerUp) {
				i, ok := index[e.ID+"/"+e.View]
				if !ok {
					t.Fatalf("the answer names %s/%s, which the export does not list", e.ID, e.View)
				}
				// Tolerance. exact_kernel: the answer's radius is its rounding bound
				// (float32 rows, entk.ExactRowError), so the float64 value from full
				// Jacobians must be within it, and that bound must be small. Sketched:
				// the same ψ in another order of summation (batched landmark features,
				// the query path's two-goroutine VJPs), so 1e-9 of the Cauchy–Schwarz
				// bound ω‖ψ_ℓ‖‖ψ_t‖ on the product's terms, far above q·2⁻⁵² ≈ 7e-15.
				tol := e.Radius
				if a.VarianceModel != certify.VarianceExactKernel {
					tol = 1e-9 * bounds[i]
				} else if e.Radius > 1e-6*math.Abs(scores[i]) {
					t.Errorf("%s/%s: rounding radius %v for score %v", e.ID, e.View, e.Radius, scores[i])
				}
				if d := math.Abs(scores[i] - e.Score); d > tol {
					t.Errorf("%s/%s: recomputed score %.17g, the answer says %.17g (|Δ| %.3g > %.3g)", e.ID, e.View, scores[i], e.Score, d, tol)
				}
			}
			// The answer's top-K is the top-K of the recomputed scores: the export lists
			// every landmark the answer ranked, with its ω (a missing or extra landmark,
			// or a wrong ω, would show here). Ties within the tolerance cannot be ordered.
			top := make([]int, len(a.TopK)+1)
			certify.TopKTo(top, scores)
			for r, e := range a.TopK {
				if want := ex.Landmarks[top[r]]; want.ID != e.ID || want.View != e.View {
					t.Errorf("rank %d: the answer has %s/%s, the recomputed scores %s/%s", r, e.ID, e.View, want.ID, want.View)
				}
			}
			if ru := ex.Landmarks[top[len(a.TopK)]]; ru.ID != extra.RunnerUp.ID || ru.View != extra.RunnerUp.View {
				t.Errorf("runner-up: the answer has %s/%s, the recomputed scores %s/%s", extra.RunnerUp.ID, extra.RunnerUp.View, ru.ID, ru.View)
			}
			t.Logf("%s: %d landmarks recomputed, verdict %s", a.VarianceModel, len(ex.Landmarks), a.Verdict)
			if a.VarianceModel == certify.VarianceExactKernel {
				checkRepresenterFromExport(t, r, ex, x, set.D)
			}

			// ?model=V of the serving version is the same export; bad and unknown versions.
			if code, b2 := httpGet(t, r.d.HTTPAddr(), "/model?model="+strconv.FormatUint(ex.Model, 10)); code != http.StatusOK || string(b2) != string(body) {
				t.Errorf("GET /model?model=%d: %d, same bytes as /model: %v", ex.Model, code, string(b2) == string(body))
			}
			for path, want := range map[string]int{"/model?model=999": http.StatusNotFound, "/model?model=x": http.StatusBadRequest, "/model?model=0": http.StatusBadRequest} {
				if code, b2 := httpGet(t, r.d.HTTPAddr(), path); code != want {
					t.Errorf("GET %s: %d %s, want %d", path, code, b2, want)
				}
			}

			// Delete the answer's first landmark: gone from the export at once, and from
			// the stored version's export after the refit.
			victim := a.TopK[0].ID
			produceMsgs(t, r.d.Brokers(), []stream.Message{deleteMsg(t, tp.Train, victim, "del-1")})
			waitFor(t, "the deletion applied", 30*time.Second, func() bool { return r.d.Status().Points == set.N-1 })
			if v, got := exportIDs(t, r.d.HTTPAddr(), "/model"); v != ex.Model {
				t.Errorf("GET /model after the deletion exports model %d, want the masked model %d (refit too early for this check)", v, ex.Model)
			} else if slices.Contains(got, victim) || len(got) != len(ex.Landmarks)-countID(ex, victim) {
				t.Errorf("GET /model lists %d landmarks after the deletion (victim listed: %v), want %d without %s",
					len(got), slices.Contains(got, victim), len(ex.Landmarks)-countID(ex, victim), victim)
			}
			waitFor(t, "the refit after the deletion", 60*time.Second, func() bool {
				s := r.d.Status()
				return s.Model > ex.Model && s.PendingDeletions == 0 && !s.RefitRunning
			})
			_, old := exportIDs(t, r.d.HTTPAddr(), "/model?model="+strconv.FormatUint(ex.Model, 10))
			if slices.Contains(old, victim) || len(old) != len(ex.Landmarks)-countID(ex, victim) {
				t.Errorf("stored model %d exports %d landmarks (victim listed: %v), want %d without %s",
					ex.Model, len(old), slices.Contains(old, victim), len(ex.Landmarks)-countID(ex, victim), victim)
			}
			_, live := httpGet(t, r.d.HTTPAddr(), "/model")
			r.stop(t)

			// The stopped daemon's file exports what the daemon served, by the same rule.
			st := openStore(t, filepath.Join(dir, StateFile))
			defer st.Close()
			got, err := ExportStored(cfg, st, 0)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			if string(gotJSON)+"\n" != string(live) {
				t.Errorf("ExportStored of the newest model differs from the daemon's last GET /model")
			}
			if old, err := ExportStored(cfg, st, ex.Model); err != nil || slices.ContainsFunc(old.Landmarks, func(l serving.ExportedLandmark) bool { return l.ID == victim }) {
				t.Errorf("ExportStored(model %d): %v, or it lists the deleted %s", ex.Model, err, victim)
			}
			other := cfg
			other.Model.Seed++
			if _, err := ExportStored(other, st, 0); !errors.Is(err, ErrConfig) {
				t.Errorf("ExportStored under another seed: %v, want ErrConfig", err)
			}
			if _, err := ExportStored(cfg, st, 999); !errors.Is(err, ErrUnknownModel) {
				t.Errorf("ExportStored(999): %v, want ErrUnknownModel", err)
			}
		})
	}
}

// exportBackbone builds the backbone an export names, as a third party would: a seeded
// network from its seed, anything else through weights.Load; the SHA-256 must match.
func exportBackbone(t *testing.T, ex serving.ModelExport) entk.Backbone {
	t.Helper()
	if s, ok := strings.CutPrefix(ex.Weights, "seeded:"); ok {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("weights %q: %v", ex.Weights, err)
		}
		b, err := entk.NewBackbone(ex.Arch, seed)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		for _, p := range b.Params() {
			h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(p)))
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != ex.WeightsSHA256 {
			t.Errorf("SHA-256 of the seeded parameters %s, export says %s", got, ex.WeightsSHA256)
		}
		return b
	}
	b, src, err := weights.Load(ex.Arch, ex.Weights, "", false, 0)
	if err != nil {
		t.Fatalf("weights %q: %v", ex.Weights, err)
	}
	if src.SHA256 != ex.WeightsSHA256 || !strings.HasPrefix(ex.Weights, "shipped:") {
		t.Errorf("weights %q sha %s, export says %s (want the shipped default)", ex.Weights, src.SHA256, ex.WeightsSHA256)
	}
	return b
}

// publishedSeed returns the seed of the retired draw whose hash is hash, from the status
// topic (0 while not published), after checking it against the hash.
func publishedSeed(t *testing.T, r *running, topic, hash string) uint64 {
	t.Helper()
	for _, m := range r.messages(topic) {
		var s stream.Status
		if json.Unmarshal(m.Value, &s) != nil || s.Kind != "eval_draw" {
			continue
		}
		var d struct {
			Seed     uint64 `json:"seed"`
			SeedHash string `json:"seed_hash"`
		}
		if err := json.Unmarshal(s.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.SeedHash == hash {
			if serving.SeedHash(d.Seed) != hash {
				t.Fatalf("published seed %d does not hash to %s", d.Seed, hash)
			}
			return d.Seed
		}
	}
	return 0
}

func httpGet(t *testing.T, addr, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, b
}

// exportIDs returns the model version and the landmark ids of GET path, which must
// answer 200.
func exportIDs(t *testing.T, addr, path string) (uint64, []string) {
	t.Helper()
	code, body := httpGet(t, addr, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var ex serving.ModelExport
	if err := json.Unmarshal(body, &ex); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ex.Landmarks))
	for i, l := range ex.Landmarks {
		out[i] = l.ID
	}
	return ex.Model, out
}

// countID is how many of ex's landmarks are point id (one per view it was chosen in).
func countID(ex serving.ModelExport, id string) int {
	n := 0
	for _, l := range ex.Landmarks {
		if l.ID == id {
			n++
		}
	}
	return n
}

// checkRepresenterFromExport asks a representer answer for x and recomputes its scores
// from the export alone: z = bias + kernel_scale·Σ_ℓ k*(x_ℓ, x)·coefficients_ℓ and
// score_ℓ = k*(x_ℓ, x)·kernel_scale·⟨coefficients_ℓ, z/‖z‖⟩, each within its radius.
func checkRepresenterFromExport(t *testing.T, r *running, ex serving.ModelExport, x []float64, dim int) {
	t.Helper()
	tp := r.d.cfg.Kafka.Topics
	produceMsgs(t, r.d.Brokers(), []stream.Message{
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "q-rep", X: x, K: 5, Score: string(certify.Representer)}, dim)})
	var a stream.Attribution
	waitFor(t, "the representer answer", 30*time.Second, func() bool {
		var ok bool
		a, ok = keyed[stream.Attribution](t, r, tp.Attributions)["q-rep"]
		return ok
	})
	if a.Score != string(certify.Representer) || len(ex.Bias) == 0 {
		t.Fatalf("answer score %q, export bias %d values", a.Score, len(ex.Bias))
	}
	b := exportBackbone(t, ex)
	ws := b.NewWorkspace()
	ks := make([]float64, len(ex.Landmarks))
	z := slices.Clone(ex.Bias)
	for i, l := range ex.Landmarks {
		ks[i] = entk.ExactKernel(b, l.X, x, ws)
		for j, c := range l.Coefficients {
			z[j] += ex.KernelScale * ks[i] * c
		}
	}
	var zn float64
	for _, v := range z {
		zn += v * v
	}
	zn = math.Sqrt(zn)
	for _, e := range a.TopK {
		for i, l := range ex.Landmarks {
			if l.ID != e.ID || l.View != e.View {
				continue
			}
			var dot float64
			for j, c := range l.Coefficients {
				dot += c * z[j]
			}
			if want := ks[i] * ex.KernelScale * dot / zn; math.Abs(want-e.Score) > e.Radius {
				t.Errorf("representer %s/%s: export gives %v, the answer %v ± %v", e.ID, e.View, want, e.Score, e.Radius)
			}
		}
	}
}
