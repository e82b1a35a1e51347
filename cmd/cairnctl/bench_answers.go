package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// certStats is how the Kafka answers of a bench certify, checked against a reference
// computed here from the daemon's exported model alone (GET /model) and full Jacobians
// (entk.JacobianTo), none of the query path's code.
type certStats struct {
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

// benchModel reads the served model through GET /model, as `cairnctl model export
// --http` does: the reference sees only what a third party sees.
func benchModel(ctx context.Context, addr string) (*daemon.ModelExport, error) {
	body, err := fetchModelExport(ctx, addr, 0)
	if err != nil {
		return nil, err
	}
	var m daemon.ModelExport
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("GET /model: %w", err)
	}
	return &m, nil
}

// checkAnswers compares each attribution (answers[i] for query xs[i]) with the exact
// top-K of its ranking over the exported model's landmarks (entk: k*(x_ℓ, x_t);
// displacement: k*·ω_ℓ; representer: k*·⟨Ã_ℓ, ẑ⟩ from the export's coefficients), with
// k* = tr(J_ℓ J_tᵀ)/d from full Jacobians, on all cores.
func checkAnswers(b entk.Backbone, m *daemon.ModelExport, answers []stream.Attribution, xs [][]float64) (certStats, error) {
	st := certStats{VarianceModel: map[string]int{}, Verdicts: map[string]int{}, Scores: map[string]int{}}
	d, p := b.OutDim(), b.NumParams()
	var idx []int
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
		if a.Model != m.Model {
			st.OtherModel++
			continue
		}
		idx = append(idx, i)
	}
	if st.Answers > 0 {
		st.CertifiedRate = float64(st.Certified) / float64(st.Answers)
	}
	if known > 0 {
		st.StabilityMean = stab / float64(known)
	}
	L := len(m.Landmarks)
	if L < 2 || len(idx) == 0 {
		return st, nil
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
		slices.Sort(want)
		slices.Sort(got)
		same := slices.Equal(got, want)
		if same {
			agree++
		}
		if a.Verdict == string(certify.Certified) && !same {
			st.Incorrect++
		}
	}
	st.TopKExactRate = float64(agree) / float64(len(idx))
	return st, nil
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

// loadStats is an open-loop query load: queries written at a fixed rate whatever the
// answers do, each timed from its query record's Kafka timestamp to its attribution
// record's.
type loadStats struct {
	Rate       float64 `json:"rate_per_second"`
	Sent       int     `json:"sent"`
	Answered   int     `json:"answered"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	SendLagMax float64 `json:"send_lag_max_ms"` // worst delay of a write behind its schedule
}

// loadPairs pairs the load's query records with their answers by request id. The tail
// reads two topics, so an answer may be read before its query record: whichever of the
// pair comes second completes it. A record seen twice (answers are at least once) counts
// once.
type loadPairs struct {
	prefix, queries    string
	sentAt, answeredAt map[string]time.Time
	lat                []float64 // milliseconds from a query record to its answer, Kafka timestamps
}

func newLoadPairs(prefix, queriesTopic string) *loadPairs {
	return &loadPairs{prefix: prefix, queries: queriesTopic, sentAt: map[string]time.Time{}, answeredAt: map[string]time.Time{}}
}

func (p *loadPairs) add(m stream.Message) {
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

// openLoad sends rate queries per second for dur on one writer goroutine, joined before
// it returns, and collects the attributions from a tail of the query and attribution
// topics. The i-th query is query(i) with the request id prefix+i; no other request id
// may start with prefix.
func openLoad(ctx context.Context, c client, w *stream.Writer, lim stream.Limits, query func(i int) stream.QueryEvent, rate float64, dur time.Duration, prefix string, stderr io.Writer) (loadStats, error) {
	ls := loadStats{Rate: rate}
	t, err := newTail(ctx, c.kc, stderr, c.topics.Queries, c.topics.Attributions)
	if err != nil {
		return ls, err
	}
	defer t.Close()
	n := int(rate * dur.Seconds())
	var sendErr error
	var lagMax time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t0 := time.Now()
		for i := range n {
			at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					sendErr = ctx.Err()
					return
				}
			}
			lagMax = max(lagMax, time.Since(at))
			q := query(i)
			q.Request = prefix + strconv.Itoa(i)
			if _, err := c.sendQuery(ctx, w, q, lim); err != nil {
				sendErr = err
				return
			}
		}
	}()
	pairs := newLoadPairs(prefix, c.topics.Queries)
	deadline, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	for len(pairs.lat) < n {
		m, err := t.next(deadline)
		if err != nil {
			break
		}
		pairs.add(m)
	}
	lat := pairs.lat
	wg.Wait()
	if sendErr != nil {
		return ls, sendErr
	}
	ls.Sent, ls.Answered = n, len(lat)
	ls.SendLagMax = lagMax.Seconds() * 1e3
	if len(lat) > 0 {
		ls.P50Ms, ls.P99Ms, ls.MaxMs = percentile(lat, 0.5), percentile(lat, 0.99), slices.Max(lat)
	}
	return ls, nil
}

// residentMB returns the process's resident set size and its peak (VmRSS, VmHWM of
// /proc/self/status) in MiB; zeros where /proc is not there.
func residentMB() (rss, peak float64) {
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

// benchBackbone is the daemon's backbone built from its configuration, as the daemon
// builds it, for the reference.
func benchBackbone(h *harness) (entk.Backbone, error) {
	f, err := pipeline.NewFeatures(h.cfg.Model, h.cfg.Sketch, "")
	if err != nil {
		return nil, err
	}
	return f.Backbone(), nil
}
