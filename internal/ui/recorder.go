package ui

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Reading is what the daemon reports at a sampling instant: cumulative counters and
// current levels. Deff is NaN when unknown.
type Reading struct {
	At                time.Time
	Events            uint64 // applied training events (upserts and deletes) so far
	Points, Pool      int
	TraceR            [2]float64
	Deff              float64
	Refits, Deletions uint64
}

// Recorder keeps the UI's memory of a running daemon: the most recent answers (a
// bounded log, by request id) and the overview's time series, sampled from Readings and
// from the answers of each interval (certified share, latency percentiles). Memory is
// bounded by the answer capacity and the series' slots. It is safe for concurrent use.
type Recorder struct {
	series *Series

	mu      sync.Mutex
	cap     int
	answers map[string]Answer
	order   []string // request ids, oldest first (a request answered again moves last)
	last    Reading
	have    bool
	lat     []float64 // latencies (ms) of the answers since the last sample
	cert    int       // certified answers since the last sample
}

// NewRecorder keeps up to answers answers and slots samples per series.
func NewRecorder(answers, slots int) *Recorder {
	return &Recorder{series: NewSeries(slots), cap: max(answers, 1), answers: map[string]Answer{}}
}

// Answered records an answer (replacing an earlier one of the same request, as an
// at-least-once redelivery repeats it) and counts it into the current interval.
func (r *Recorder) Answered(a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.answers[a.Request]; ok {
		r.order = slices.DeleteFunc(r.order, func(s string) bool { return s == a.Request })
	} else if len(r.order) >= r.cap {
		delete(r.answers, r.order[0])
		r.order = r.order[1:]
	}
	r.answers[a.Request] = a
	r.order = append(r.order, a.Request)
	r.lat = append(r.lat, a.LatencyMS)
	if a.Verdict == "certified" {
		r.cert++
	}
}

// Answer returns the kept answer of request.
func (r *Recorder) Answer(request string) (Answer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.answers[request]
	return a, ok
}

// Recent returns up to n kept answers, most recent first.
func (r *Recorder) Recent(n int) []AnswerRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]AnswerRef, 0, min(n, len(r.order)))
	for i := len(r.order) - 1; i >= 0 && len(out) < n; i-- {
		a := r.answers[r.order[i]]
		out = append(out, AnswerRef{Request: a.Request, At: a.At, Model: a.Model, Verdict: a.Verdict})
	}
	return out
}

// Record turns rd and the answers since the previous Record into one sample: the ingest
// rate is the change of Events over the interval (NaN at the first reading), the
// certified share and the latency percentiles are those of the interval's answers (NaN
// without answers), the rest are rd's levels.
func (r *Recorder) Record(rd Reading) {
	r.mu.Lock()
	s := Sample{At: rd.At}
	v := &s.Values
	v[0] = math.NaN()
	if r.have {
		if dt := rd.At.Sub(r.last.At).Seconds(); dt > 0 && rd.Events >= r.last.Events {
			v[0] = float64(rd.Events-r.last.Events) / dt
		}
	}
	v[1], v[2], v[3], v[4], v[5] = float64(rd.Points), float64(rd.Pool), rd.TraceR[0], rd.TraceR[1], rd.Deff
	v[6], v[7] = float64(rd.Refits), float64(rd.Deletions)
	v[8], v[9], v[10] = math.NaN(), math.NaN(), math.NaN()
	if n := len(r.lat); n > 0 {
		v[8] = float64(r.cert) / float64(n)
		slices.Sort(r.lat)
		v[9], v[10] = quantile(r.lat, 0.5), quantile(r.lat, 0.99)
	}
	r.last, r.have, r.lat, r.cert = rd, true, r.lat[:0], 0
	r.mu.Unlock()
	r.series.Add(s)
}

// Samples returns the series' samples, oldest first.
func (r *Recorder) Samples() []Sample { return r.series.Snapshot() }

// quantile is the q-quantile of sorted xs by the nearest-rank rule: the value at rank
// ⌈q·n⌉.
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}
