package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/base/par"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/internal/serving/gradref"
	"github.com/cairnhq/cairn/stream"
)

// Report is the output of `cairnctl bench`. Absolute rates and latencies depend
// on the machine and on what else runs on it; ingest_vs_features_ratio compares the
// daemon's ingest rate with the bare feature computation measured in the same run and
// is the number to compare across machines.
type Report struct {
	Data       string `json:"data"`
	N          int    `json:"n"`
	Queries    int    `json:"queries"`
	M          int    `json:"m"`
	GOMAXPROCS int    `json:"gomaxprocs"`

	// IngestEventsPerSecond: n upserts from the first write until Status().Ingest.Upserts
	// reaches n (IngestMode "live"), or, with --backlog ("backlog"), the upserts after
	// the first applied batch over the time from it until all n are applied, the rows
	// having been written before the daemon started. ProduceEventsPerSecond: the
	// producer alone (writes acknowledged).
	IngestMode             string  `json:"ingest_mode"`
	IngestEventsPerSecond  float64 `json:"ingest_events_per_second"`
	ProduceEventsPerSecond float64 `json:"produce_events_per_second"`
	// FeaturesPerSecondReference: points per second through Features.BothViewsTo (both
	// views, the fit draw), the per-upsert work of ingest without Kafka and bbolt.
	FeaturesPerSecondReference float64 `json:"features_per_second_reference"`
	IngestVsFeaturesRatio      float64 `json:"ingest_vs_features_ratio"`
	// IngestPhaseSeconds is where the ingest's wall time went, summed over its batches
	// (ingest.Phases; between is the reader's and the daemon's time between batches).
	IngestPhaseSeconds ingest.Phases `json:"ingest_phase_seconds"`
	// IngestBatches is the number of batches (transactions) the n upserts took.
	IngestBatches uint64 `json:"ingest_batches"`
	// LoadShare is φ (schedstat.go) over the feature reference and over the ingest: the
	// share of a core that the machine's other work left this process's busy threads,
	// 1 on an idle machine. IngestVsFeaturesRatioLoadCorrected divides each rate by its
	// φ (what each would have been on an idle machine, were the load even through it);
	// both are absent where Linux's schedstat is not.
	LoadShare                          *LoadShare `json:"load_share,omitempty"`
	IngestVsFeaturesRatioLoadCorrected float64    `json:"ingest_vs_features_ratio_load_corrected,omitempty"`

	QueryInProcessP50Ms float64 `json:"query_in_process_p50_ms"`
	QueryInProcessP99Ms float64 `json:"query_in_process_p99_ms"`
	QueryKafkaP50Ms     float64 `json:"query_kafka_p50_ms"`
	QueryKafkaP99Ms     float64 `json:"query_kafka_p99_ms"`

	// RefitSeconds is Status().RefitSeconds of the model fitted on the n points, and
	// RefitPhaseSeconds its phases (Status().RefitPhases: sync, blocks, init, fit, reseed,
	// reseed_beside, serving); DeletionRefitPhaseSeconds those of the deletion's refit.
	RefitSeconds              float64            `json:"refit_seconds"`
	RefitPhaseSeconds         map[string]float64 `json:"refit_phase_seconds,omitempty"`
	DeletionRefitPhaseSeconds map[string]float64 `json:"deletion_refit_phase_seconds,omitempty"`
	// DeletedID is the deleted landmark; DeletionToAuditSeconds the time from writing
	// the delete until its audit arrived; DeletionRefitSeconds the refit that the
	// deletion triggered (Status().RefitSeconds once the audit is in).
	DeletedID                        string  `json:"deleted_id"`
	DeletionToAuditSeconds           float64 `json:"deletion_to_audit_seconds"`
	DeletionRefitSeconds             float64 `json:"deletion_refit_seconds"`
	DeletionToAuditMinusRefitSeconds float64 `json:"deletion_to_audit_minus_refit_seconds"`

	// Certification: the closed-loop Kafka answers checked against a reference computed
	// from GET /model and full Jacobians. Load: an open-loop load at --rate of queries by
	// input (x), zero with --by id; LoadByID: the same load of queries by stored id (a
	// training point's id), absent with --by x.
	Certification CertStats  `json:"certification"`
	Load          LoadStats  `json:"load"`
	LoadByID      *LoadStats `json:"load_by_id,omitempty"`
	// Resident memory of the whole process (daemon, broker and the bench client) after
	// the load, and its peak so far, in MiB.
	ResidentMB     float64 `json:"resident_mb"`
	PeakResidentMB float64 `json:"peak_resident_mb"`

	TargetsMet map[string]bool `json:"targets_met"`
	Note       string          `json:"note"`
}

// LoadShare is φ over two phases of a bench (Report.LoadShare).
type LoadShare struct {
	Reference float64 `json:"reference"`
	Ingest    float64 `json:"ingest"`
}

// Targets of the operator contract.
const (
	targetIngestEventsPerSecond = 1000
	targetQueryKafkaP99Ms       = 20
	targetDeletionSlackSeconds  = 1
	targetCertifiedRate         = 0.9
	targetLoadP99Ms             = 25
)

// SetTargets records in TargetsMet which of the operator contract's targets the run
// met; the load targets count when a load by x (by is not "id") or by id ran at rate > 0.
func (rep *Report) SetTargets(rate float64, by string) {
	rep.TargetsMet = map[string]bool{
		"ingest_events_per_second_ge_1000":   rep.IngestEventsPerSecond >= targetIngestEventsPerSecond,
		"query_kafka_p99_le_20ms":            rep.QueryKafkaP99Ms <= targetQueryKafkaP99Ms,
		"deletion_to_audit_le_refit_plus_1s": rep.DeletionToAuditMinusRefitSeconds <= targetDeletionSlackSeconds,
		"certified_rate_ge_0.9":              rep.Certification.CertifiedRate >= targetCertifiedRate,
		"incorrect_certificates_eq_0":        rep.Certification.Incorrect == 0,
	}
	if rate > 0 && by != "id" {
		rep.TargetsMet["load_p99_le_25ms"] = rep.Load.Answered == rep.Load.Sent && rep.Load.P99Ms <= targetLoadP99Ms
	}
	if l := rep.LoadByID; l != nil {
		rep.TargetsMet["load_by_id_p99_le_25ms"] = l.Answered == l.Sent && l.P99Ms <= targetLoadP99Ms
	}
}

// CertStats is how the Kafka answers of a bench certify, checked against a reference
// computed here from the daemon's exported model alone (GET /model) and full Jacobians
// (entk.JacobianTo), none of the query path's code.
type CertStats struct {
	Answers       int     `json:"answers"`
	Certified     int     `json:"certified"`
	CertifiedRate float64 `json:"certified_rate"`
	// Incorrect: certified answers whose top-K set differs from the reference top-K.
	Incorrect int `json:"incorrect"`
	// TopKExactRate: answers (certified or not) whose top-K set equals the reference's.
	TopKExactRate float64 `json:"topk_exact_rate"`
	// OtherModel: answers computed on another model version than the exported one (not
	// checked).
	OtherModel    int            `json:"other_model"`
	VarianceModel map[string]int `json:"variance_model"`
	// Verdicts counts every verdict; Stable the answers whose stability met the target;
	// StabilityMean the mean of the known stabilities; Scores the rankings answered.
	Verdicts      map[string]int `json:"verdicts"`
	Stable        int            `json:"stable"`
	StabilityMean float64        `json:"stability_mean"`
	Scores        map[string]int `json:"scores"`
}

// Stored is the stored points the model was fitted on, as the bench wrote them: the
// gradient ranking's reference ranks them (ids, inputs and labels, in one order).
type Stored struct {
	IDs    []string
	X      [][]float64
	Labels []int
}

// CheckAnswers compares each attribution (answers[i] for query xs[i]) with the exact
// top-K of its ranking: over the exported model's landmarks (entk: k*(x_ℓ, x_t);
// displacement: k*·ω_ℓ; representer: k*·⟨Ã_ℓ, ẑ⟩ from the export's coefficients), with
// k* = tr(J_ℓ J_tᵀ)/d from full Jacobians, or for the gradient ranking over the stored
// points pts (gradref: ⟨J_tᵀu_t, J_iᵀg_i⟩ from full Jacobians), on all cores.
func CheckAnswers(b entk.Backbone, m *daemon.ModelExport, answers []stream.Attribution, xs [][]float64, pts Stored) (CertStats, error) {
	st := CertStats{VarianceModel: map[string]int{}, Verdicts: map[string]int{}, Scores: map[string]int{}}
	var idx, gidx []int
	var stab float64
	var known int
	for i, a := range answers {
		st.Answers++
		st.VarianceModel[a.VarianceModel]++
		st.Verdicts[a.Verdict]++
		st.Scores[a.Score]++
		if a.Stable {
			st.Stable++
		}
		if a.Stability != nil {
			stab += *a.Stability
			known++
		}
		if a.Verdict == string(certify.Certified) {
			st.Certified++
		}
		switch {
		case a.Model != m.Model:
			st.OtherModel++
		case certify.Ranking(a.Score).AllPoints():
			gidx = append(gidx, i)
		default:
			idx = append(idx, i)
		}
	}
	if st.Answers > 0 {
		st.CertifiedRate = float64(st.Certified) / float64(st.Answers)
	}
	if known > 0 {
		st.StabilityMean = stab / float64(known)
	}
	agree := checkLandmarkAnswers(&st, b, m, answers, xs, idx)
	agree += checkGradientAnswers(&st, b, answers, xs, gidx, pts)
	if n := len(idx) + len(gidx); n > 0 {
		st.TopKExactRate = float64(agree) / float64(n)
	}
	return st, nil
}

// checkLandmarkAnswers checks the landmark-ranked answers idx (CheckAnswers), counting
// the incorrect certified ones in st, and returns how many have the reference top-K.
func checkLandmarkAnswers(st *CertStats, b entk.Backbone, m *daemon.ModelExport, answers []stream.Attribution, xs [][]float64, idx []int) int {
	d, p := b.OutDim(), b.NumParams()
	L := len(m.Landmarks)
	if L < 2 || len(idx) == 0 {
		return 0
	}
	// Query Jacobians once (len(idx)·d·P floats), then each landmark's Jacobian against all.
	jq := make([]float64, len(idx)*d*p)
	ws := b.NewWorkspace()
	for j, i := range idx {
		entk.JacobianTo(jq[j*d*p:(j+1)*d*p], b, xs[i], ws)
	}
	scores := make([]float64, len(idx)*L) // scores[j·L+ℓ]
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := b.NewWorkspace()
			jl := make([]float64, d*p)
			for l := w; l < L; l += workers {
				entk.JacobianTo(jl, b, m.Landmarks[l].X, ws)
				for j := range idx {
					scores[j*L+l] = floats.Dot(jl, jq[j*d*p:(j+1)*d*p]) / float64(d)
				}
			}
		}()
	}
	wg.Wait()
	agree := 0
	for j, i := range idx {
		a := answers[i]
		k := len(a.TopK)
		top := make([]int, k)
		certify.TopKTo(top, rankingScores(m, certify.Ranking(a.Score), scores[j*L:(j+1)*L]))
		want := make([]string, k)
		for r, l := range top {
			want[r] = m.Landmarks[l].ID + "/" + m.Landmarks[l].View
		}
		got := make([]string, k)
		for r, e := range a.TopK {
			got[r] = e.ID + "/" + e.View
		}
		if st.tally(a.Verdict, got, want) {
			agree++
		}
	}
	return agree
}

// tally reports whether an answer's top-K set got is the reference's want (both sorted
// here) and counts the answer as incorrect in st when it was certified and is not.
func (st *CertStats) tally(verdict string, got, want []string) bool {
	slices.Sort(want)
	slices.Sort(got)
	same := slices.Equal(got, want)
	if verdict == string(certify.Certified) && !same {
		st.Incorrect++
	}
	return same
}

// checkGradientAnswers checks the gradient-ranked answers gidx (either gradient ranking,
// the cosine one with each point's ‖J_iᵀg_i‖ divided out) against gradref over the
// stored points pts (each point's J_iᵀg_i once, on all cores), counting the incorrect
// certified ones in st, and returns how many have the reference top-K set.
func checkGradientAnswers(st *CertStats, b entk.Backbone, answers []stream.Attribution, xs [][]float64, gidx []int, pts Stored) int {
	if len(gidx) == 0 || len(pts.IDs) == 0 {
		return 0
	}
	classes := slices.Max(pts.Labels) + 1
	rows, norms := make([][]float64, len(pts.IDs)), make([]float64, len(pts.IDs))
	par.For(len(rows), 8, par.Workers(len(rows), 8), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			rows[i] = gradref.Point(b, pts.X[i], pts.Labels[i])
			norms[i] = floats.Norm(rows[i], 2)
		}
	})
	agree := 0
	for _, i := range gidx {
		a := answers[i]
		v := gradref.Query(b, xs[i], classes)
		ref := make([]float64, len(rows))
		for j, r := range rows {
			ref[j] = floats.Dot(v, r)
			if certify.Ranking(a.Score) == certify.GradientCosine && norms[j] > 0 {
				ref[j] /= norms[j] // the query's norm, one positive factor, changes no order
			}
		}
		top := make([]int, len(a.TopK))
		certify.TopKTo(top, ref)
		want, got := make([]string, len(top)), make([]string, len(top))
		for r, j := range top {
			want[r] = pts.IDs[j]
		}
		for r, e := range a.TopK {
			got[r] = e.ID
		}
		if st.tally(a.Verdict, got, want) {
			agree++
		}
	}
	return agree
}

// rankingScores turns one query's exact kernel row over the export's landmarks into the
// scores of ranking r, from the export alone (its ω, coefficients and bias); the row is
// not modified.
func rankingScores(m *daemon.ModelExport, r certify.Ranking, row []float64) []float64 {
	out := slices.Clone(row)
	switch r {
	case certify.Displacement:
		for l := range out {
			out[l] *= m.Landmarks[l].Omega
		}
	case certify.Representer:
		z := slices.Clone(m.Bias)
		for l, k := range row {
			floats.AddScaled(z, m.KernelScale*k, m.Landmarks[l].Coefficients)
		}
		zn := floats.Norm(z, 2)
		for l, k := range row {
			out[l] = k * m.KernelScale * floats.Dot(m.Landmarks[l].Coefficients, z) / zn
		}
	}
	return out
}

// LoadStats is an open-loop query load: queries written at a fixed rate whatever the
// answers do, each timed from its query record's Kafka timestamp to its attribution
// record's.
type LoadStats struct {
	Rate       float64 `json:"rate_per_second"`
	Sent       int     `json:"sent"`
	Answered   int     `json:"answered"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	SendLagMax float64 `json:"send_lag_max_ms"` // worst delay of a write behind its schedule
}

// LoadPairs pairs the load's query records with their answers by request id. The tail
// reads two topics, so an answer may be read before its query record: whichever of the
// pair comes second completes it. A record seen twice (answers are at least once) counts
// once.
type LoadPairs struct {
	prefix, queries    string
	sentAt, answeredAt map[string]time.Time
	lat                []float64 // milliseconds from a query record to its answer, Kafka timestamps
}

// NewLoadPairs pairs the records of requests whose ids start with prefix, the query
// records being those of queriesTopic.
func NewLoadPairs(prefix, queriesTopic string) *LoadPairs {
	return &LoadPairs{prefix: prefix, queries: queriesTopic, sentAt: map[string]time.Time{}, answeredAt: map[string]time.Time{}}
}

// Add takes one record of the query or the attribution topic.
func (p *LoadPairs) Add(m stream.Message) {
	req := string(m.Key)
	if !strings.HasPrefix(req, p.prefix) {
		return
	}
	mine, other := p.sentAt, p.answeredAt
	if m.Topic != p.queries {
		mine, other = p.answeredAt, p.sentAt
	}
	if _, dup := mine[req]; dup {
		return
	}
	mine[req] = m.Time
	if _, ok := other[req]; ok {
		p.lat = append(p.lat, p.answeredAt[req].Sub(p.sentAt[req]).Seconds()*1e3)
	}
}

// Latencies are the milliseconds from each completed pair's query record to its
// answer, by Kafka timestamps, in the order the pairs completed. The slice is p's.
func (p *LoadPairs) Latencies() []float64 { return p.lat }

// ResidentMB returns the process's resident set size and its peak (VmRSS, VmHWM of
// /proc/self/status) in MiB; zeros where /proc is not there.
func ResidentMB() (rss, peak float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = v / 1024
		case "VmHWM:":
			peak = v / 1024
		}
	}
	return rss, peak
}

// FeatureRate times Features.BothViewsTo on the first k rows of set (both views of
// each point under the fit draw, what ingest computes per upsert) and returns points
// per second.
func FeatureRate(cfg config.Config, set *dataset.Set, k int) (float64, error) {
	f, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		return 0, err
	}
	k = min(k, set.N)
	if set.D != f.InputDim() {
		return 0, fmt.Errorf("--data has %d features but the model %s takes %d", set.D, cfg.Model.Arch, f.InputDim())
	}
	dst := make([]float64, 2*k*f.Dim())
	views := make([]float64, 2*k*set.D)
	xs := set.X[:k*set.D]
	ids := set.IDs[:k]
	// One warm-up point first, so the timing excludes first-touch costs.
	d, q := set.D, f.Dim()
	f.BothViewsTo(dst[:2*q], views[:2*d], xs[:d], ids[:1])
	t := time.Now()
	f.BothViewsTo(dst, views, xs, ids)
	return float64(k) / time.Since(t).Seconds(), nil
}

// Percentile is the nearest-rank p-quantile of xs (the smallest value with at least
// p·n values at or below it); xs is sorted in place. NaN for an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
