package ui

import (
	"sync"
	"time"
)

// Series sizes: the number of metrics (metricInfo, whose order is the order of
// Sample.Values) and the default ring length (an hour at 5 s).
const (
	metricCount        = 11
	defaultSeriesSlots = 720
)

// metricInfo is what a chart says about a metric: its title and unit, and the chart it
// is drawn in (metrics sharing a chart are drawn as separate lines).
var metricInfo = [metricCount]struct {
	title, unit, chart string
}{
	{"ingest rate", "events/s", "Ingest rate"},
	{"stored points", "points", "Stored points"},
	{"served pool size M", "landmarks", "Pool size"},
	{"tr R view A", "kernel mass", "Residual certificate tr R"},
	{"tr R view B", "kernel mass", "Residual certificate tr R"},
	{"d_eff", "dimensions", "Effective dimension d_eff"},
	{"refits", "count", "Refits (cumulative)"},
	{"deletions", "count", "Deletions (cumulative)"},
	{"certified share", "fraction", "Share of certified answers"},
	{"p50", "ms", "Query latency"},
	{"p99", "ms", "Query latency"},
}

// Sample is one point of every series, taken at At. A NaN value is a gap (nothing to
// report, such as the certified share of an interval without answers).
type Sample struct {
	At     time.Time
	Values [metricCount]float64
}

// Series keeps the most recent samples in a ring of fixed capacity: memory is bounded
// whatever the uptime. It is safe for concurrent use.
type Series struct {
	mu    sync.Mutex
	ring  []Sample
	next  int
	count int
}

// NewSeries returns a ring of slots samples (slots ≤ 0: 720, one hour at 5 s).
func NewSeries(slots int) *Series {
	if slots <= 0 {
		slots = defaultSeriesSlots
	}
	return &Series{ring: make([]Sample, slots)}
}

// Add appends s, dropping the oldest sample when the ring is full.
func (r *Series) Add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = s
	r.next = (r.next + 1) % len(r.ring)
	r.count = min(r.count+1, len(r.ring))
}

// Snapshot returns the samples held, oldest first.
func (r *Series) Snapshot() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sample, 0, r.count)
	start := (r.next - r.count + len(r.ring)) % len(r.ring)
	for i := range r.count {
		out = append(out, r.ring[(start+i)%len(r.ring)])
	}
	return out
}
