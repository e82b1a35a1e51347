package daemon

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	goruntime "runtime"
	runtimemetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// MetricsContentType is the Content-Type of Metrics.WriteTo's output: the Prometheus
// text exposition format, version 0.0.4.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// Histogram bucket upper bounds, in seconds, on a 1-2-5 grid (each step ×2 or ×2.5) so
// that the le labels read as round numbers.
var (
	// A query is one feature map and a top-K over the pool: sub-millisecond on a small
	// pool, seconds only when something is wrong.
	queryBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}
	// A refit is R fits of Adam over the pool: seconds to many minutes.
	refitBuckets = []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	// A deletion's audit waits for the refit it triggers, or is immediate when the
	// deleted point was no landmark.
	auditBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
)

// Metrics holds the daemon's Prometheus metrics. Every method is safe for concurrent
// use. Updating an existing series allocates nothing: labeled series live in maps
// under one RWMutex that is write-locked only the first time a label combination is
// seen, and their values are atomics; each histogram has its own small mutex so that
// a scrape sees its buckets, sum and count from the same instant.
//
// Label values are taken as given (escaped on output, invalid UTF-8 replaced by
// U+FFFD): callers pass values from a small fixed set (configured topics, rejection
// reasons, verdicts, views), because every distinct value is a series kept for the
// life of the process.
type Metrics struct {
	start time.Time

	mu       sync.RWMutex // guards the maps below, not the values they point to
	events   map[eventSeriesKey]*atomic.Uint64
	rejects  map[string]*atomic.Uint64
	lag      map[lagSeriesKey]*atomic.Int64
	residual map[string]*residualSeries
	queries  map[string]*atomic.Uint64

	poolPoints    atomic.Int64
	poolLandmarks atomic.Int64
	modelVersion  atomic.Uint64
	modelMasked   atomic.Int64
	refits        [3]atomic.Uint64 // indexed by refitResults
	deletions     [2]atomic.Uint64 // [0] landmark="false", [1] landmark="true"

	querySeconds *promHistogram
	refitSeconds *promHistogram
	auditSeconds *promHistogram // its count is cairn_audits_total

	sizeHint atomic.Int64 // length of the last exposition, to size the next buffer
}

type eventSeriesKey struct{ topic, result string }

type lagSeriesKey struct {
	topic     string
	partition int
}

type residualSeries struct {
	traceR, traceK atomic.Uint64 // float64 bits
	exact          atomic.Bool
}

// refitResults are the values of cairn_refits_total's result label, in output order.
var refitResults = [3]string{"cancelled", "error", "ok"}

const (
	refitCancelled = iota
	refitError
	refitOK
)

// NewMetrics returns metrics with every counter at zero. process_start_time_seconds
// reports the time NewMetrics was called, the daemon's start.
func NewMetrics() *Metrics {
	return &Metrics{
		start:        time.Now(),
		events:       make(map[eventSeriesKey]*atomic.Uint64),
		rejects:      make(map[string]*atomic.Uint64),
		lag:          make(map[lagSeriesKey]*atomic.Int64),
		residual:     make(map[string]*residualSeries),
		queries:      make(map[string]*atomic.Uint64),
		querySeconds: newHistogram(queryBuckets),
		refitSeconds: newHistogram(refitBuckets),
		auditSeconds: newHistogram(auditBuckets),
	}
}

// seriesOf returns the series of key k in mp, creating it on first use. The common
// case, an existing series, takes only the read lock and allocates nothing.
func seriesOf[K comparable, V any](mu *sync.RWMutex, mp map[K]*V, k K) *V {
	mu.RLock()
	v := mp[k]
	mu.RUnlock()
	if v != nil {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v = mp[k]; v == nil {
		v = new(V)
		mp[k] = v
	}
	return v
}

func checkMetricCount(what string, n int) {
	if n < 0 {
		panic("daemon: Metrics." + what + " with negative count " + strconv.Itoa(n))
	}
}

// AddEvents counts n consumed input messages of topic by result (applied,
// dead_letter, skipped or missing) in cairn_events_total. n = 0 creates the series at
// zero; a negative n panics (counters never decrease).
func (m *Metrics) AddEvents(topic, result string, n int) {
	checkMetricCount("AddEvents", n)
	seriesOf(&m.mu, m.events, eventSeriesKey{topic, result}).Add(uint64(n))
}

// AddReject counts n rejected inputs by reason in cairn_rejects_total.
func (m *Metrics) AddReject(reason string, n int) {
	checkMetricCount("AddReject", n)
	seriesOf(&m.mu, m.rejects, reason).Add(uint64(n))
}

// SetLag sets cairn_consumer_lag, the messages of (topic, partition) not yet applied.
func (m *Metrics) SetLag(topic string, partition int, lag int64) {
	seriesOf(&m.mu, m.lag, lagSeriesKey{topic, partition}).Store(lag)
}

// SetPool sets cairn_pool_points (stored points) and cairn_pool_landmarks (the served
// pool's size).
func (m *Metrics) SetPool(points, landmarks int) {
	m.poolPoints.Store(int64(points))
	m.poolLandmarks.Store(int64(landmarks))
}

// SetResidual sets the residual certificate of one view: cairn_residual_trace (tr R),
// cairn_kernel_trace (tr K) and cairn_residual_exact (1 when tr R is exact, 0 when it
// is an upper bound between syncs).
func (m *Metrics) SetResidual(view string, traceR, traceK float64, exact bool) {
	s := seriesOf(&m.mu, m.residual, view)
	s.traceR.Store(math.Float64bits(traceR))
	s.traceK.Store(math.Float64bits(traceK))
	s.exact.Store(exact)
}

// SetModel sets cairn_model_version (0: none yet) and cairn_model_masked_landmarks,
// the serving model's landmarks deleted since its fit.
func (m *Metrics) SetModel(version uint64, masked int) {
	m.modelVersion.Store(version)
	m.modelMasked.Store(int64(masked))
}

// ObserveRefit records one finished refit: cairn_refits_total by result (ok when err
// is nil, cancelled when errors.Is(err, context.Canceled), error otherwise) and its
// duration in the cairn_refit_seconds histogram.
func (m *Metrics) ObserveRefit(seconds float64, err error) {
	switch {
	case err == nil:
		m.refits[refitOK].Add(1)
	case errors.Is(err, context.Canceled):
		m.refits[refitCancelled].Add(1)
	default:
		m.refits[refitError].Add(1)
	}
	m.refitSeconds.observe(seconds)
}

// ObserveQuery records one answered query: its latency in the cairn_query_seconds
// histogram and cairn_queries_total by verdict.
func (m *Metrics) ObserveQuery(seconds float64, verdict string) {
	m.querySeconds.observe(seconds)
	seriesOf(&m.mu, m.queries, verdict).Add(1)
}

// ObserveDeletion counts one applied deletion of a stored point in
// cairn_deletions_total, by whether the point was a landmark of the served pool.
func (m *Metrics) ObserveDeletion(wasLandmark bool) {
	if wasLandmark {
		m.deletions[1].Add(1)
	} else {
		m.deletions[0].Add(1)
	}
}

// ObserveAudit records one emitted deletion audit: cairn_audits_total and the time
// from the deletion's application to its audit in cairn_deletion_to_audit_seconds.
func (m *Metrics) ObserveAudit(deletionToAuditSeconds float64) {
	m.auditSeconds.observe(deletionToAuditSeconds)
}

// promHistogram is a Prometheus histogram with fixed upper bounds.
type promHistogram struct {
	bounds []float64 // ascending, finite; the +Inf bucket is implicit

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative: counts[i] holds bounds[i-1] < v <= bounds[i], counts[len(bounds)] the rest
	sum    float64
}

func newHistogram(bounds []float64) *promHistogram {
	if !slices.IsSorted(bounds) || len(bounds) == 0 || math.IsInf(bounds[len(bounds)-1], 0) {
		panic("daemon: histogram bounds must be ascending and finite")
	}
	return &promHistogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe adds v. A NaN is dropped: it has no bucket and would make the sum NaN
// forever.
func (h *promHistogram) observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	// The first bound >= v: Prometheus buckets are "less than or equal".
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

// snapshotTo copies the per-bucket counts into dst (len(bounds)+1) and returns the sum.
func (h *promHistogram) snapshotTo(dst []uint64) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	copy(dst, h.counts)
	return h.sum
}

// WriteTo writes every metric in the Prometheus text exposition format 0.0.4
// (Content-Type MetricsContentType): families in alphabetical order of name, each with
// its HELP and TYPE line, series within a family in ascending order of their label
// values (partitions numerically), so equal states give equal bytes. The exposition
// is built in memory first and written with one Write.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	b := make([]byte, 0, m.sizeHint.Load()+512)
	b = m.appendExposition(b)
	m.sizeHint.Store(int64(len(b)))
	n, err := w.Write(b)
	return int64(n), err
}

// labeledSeries is one labeled series of a family: its label key and its value, which never
// moves once created, so it is read after the map lock is released.
type labeledSeries[K, V any] struct {
	key K
	val *V
}

// collectSeries returns the series of mp; the caller holds m.mu for reading.
func collectSeries[K comparable, V any](mp map[K]*V) []labeledSeries[K, V] {
	out := make([]labeledSeries[K, V], 0, len(mp))
	for k, v := range mp {
		out = append(out, labeledSeries[K, V]{k, v})
	}
	return out
}

func bySeriesKey[V any](a, c labeledSeries[string, V]) int { return strings.Compare(a.key, c.key) }

func (m *Metrics) appendExposition(b []byte) []byte {
	m.mu.RLock()
	events := collectSeries(m.events)
	rejects := collectSeries(m.rejects)
	lags := collectSeries(m.lag)
	views := collectSeries(m.residual)
	verdicts := collectSeries(m.queries)
	m.mu.RUnlock()
	slices.SortFunc(events, func(a, c labeledSeries[eventSeriesKey, atomic.Uint64]) int {
		if r := strings.Compare(a.key.topic, c.key.topic); r != 0 {
			return r
		}
		return strings.Compare(a.key.result, c.key.result)
	})
	slices.SortFunc(lags, func(a, c labeledSeries[lagSeriesKey, atomic.Int64]) int {
		if r := strings.Compare(a.key.topic, c.key.topic); r != 0 {
			return r
		}
		return cmp.Compare(a.key.partition, c.key.partition)
	})
	slices.SortFunc(rejects, bySeriesKey)
	slices.SortFunc(views, bySeriesKey)
	slices.SortFunc(verdicts, bySeriesKey)

	auditCounts := make([]uint64, len(auditBuckets)+1)
	auditSum := m.auditSeconds.snapshotTo(auditCounts)
	var audits uint64
	for _, c := range auditCounts {
		audits += c
	}
	b = promAppendHeader(b, "cairn_audits_total", "counter", "Deletion audits emitted.")
	b = promAppendUint(b, "cairn_audits_total", nil, audits)

	b = promAppendHeader(b, "cairn_consumer_lag", "gauge", "Input messages of a topic partition not yet applied.")
	for _, s := range lags {
		b = promAppendInt(b, "cairn_consumer_lag", []string{"topic", s.key.topic, "partition", strconv.Itoa(s.key.partition)}, s.val.Load())
	}

	b = promAppendHeader(b, "cairn_deletion_to_audit_seconds", "histogram", "Time from applying a deletion to emitting its audit.")
	b = promAppendHistogram(b, "cairn_deletion_to_audit_seconds", auditBuckets, auditCounts, auditSum)

	b = promAppendHeader(b, "cairn_deletions_total", "counter", "Deletions of stored points applied, by whether the point was a landmark.")
	b = promAppendUint(b, "cairn_deletions_total", []string{"landmark", "false"}, m.deletions[0].Load())
	b = promAppendUint(b, "cairn_deletions_total", []string{"landmark", "true"}, m.deletions[1].Load())

	b = promAppendHeader(b, "cairn_events_total", "counter", "Input messages consumed, by topic and result (applied, dead_letter, skipped, missing).")
	for _, s := range events {
		b = promAppendUint(b, "cairn_events_total", []string{"topic", s.key.topic, "result", s.key.result}, s.val.Load())
	}

	b = promAppendHeader(b, "cairn_kernel_trace", "gauge", "Trace tr K of the sketched kernel over the stored points, by view.")
	for _, s := range views {
		b = promAppendFloat(b, "cairn_kernel_trace", []string{"view", s.key}, math.Float64frombits(s.val.traceK.Load()))
	}

	b = promAppendHeader(b, "cairn_model_masked_landmarks", "gauge", "Landmarks of the serving model deleted since its fit.")
	b = promAppendInt(b, "cairn_model_masked_landmarks", nil, m.modelMasked.Load())
	b = promAppendHeader(b, "cairn_model_version", "gauge", "Serving model version (0: none yet).")
	b = promAppendUint(b, "cairn_model_version", nil, m.modelVersion.Load())
	b = promAppendHeader(b, "cairn_pool_landmarks", "gauge", "Landmarks in the served pool.")
	b = promAppendInt(b, "cairn_pool_landmarks", nil, m.poolLandmarks.Load())
	b = promAppendHeader(b, "cairn_pool_points", "gauge", "Stored training points.")
	b = promAppendInt(b, "cairn_pool_points", nil, m.poolPoints.Load())

	b = promAppendHeader(b, "cairn_queries_total", "counter", "Queries answered, by verdict.")
	for _, s := range verdicts {
		b = promAppendUint(b, "cairn_queries_total", []string{"verdict", s.key}, s.val.Load())
	}

	b = promAppendHeader(b, "cairn_query_seconds", "histogram", "Latency of answering one query.")
	b = m.querySeconds.appendTo(b, "cairn_query_seconds")
	b = promAppendHeader(b, "cairn_refit_seconds", "histogram", "Wall time of one refit, from its snapshot to its install or failure.")
	b = m.refitSeconds.appendTo(b, "cairn_refit_seconds")

	b = promAppendHeader(b, "cairn_refits_total", "counter", "Refits finished, by result (ok, error, cancelled).")
	for i, r := range refitResults {
		b = promAppendUint(b, "cairn_refits_total", []string{"result", r}, m.refits[i].Load())
	}

	b = promAppendHeader(b, "cairn_rejects_total", "counter", "Input messages rejected to the dead-letter topic, by reason.")
	for _, s := range rejects {
		b = promAppendUint(b, "cairn_rejects_total", []string{"reason", s.key}, s.val.Load())
	}

	b = promAppendHeader(b, "cairn_residual_exact", "gauge", "1 when cairn_residual_trace is the exact tr R, 0 when it is an upper bound between syncs.")
	for _, s := range views {
		var e int64
		if s.val.exact.Load() {
			e = 1
		}
		b = promAppendInt(b, "cairn_residual_exact", []string{"view", s.key}, e)
	}
	b = promAppendHeader(b, "cairn_residual_trace", "gauge", "Residual certificate tr R of the served landmark pool, by view.")
	for _, s := range views {
		b = promAppendFloat(b, "cairn_residual_trace", []string{"view", s.key}, math.Float64frombits(s.val.traceR.Load()))
	}

	goroutines, heap := promRuntimeSamples()
	b = promAppendHeader(b, "go_goroutines", "gauge", "Number of goroutines that currently exist.")
	b = promAppendUint(b, "go_goroutines", nil, goroutines)
	b = promAppendHeader(b, "go_memstats_heap_alloc_bytes", "gauge", "Bytes of allocated heap objects.")
	b = promAppendUint(b, "go_memstats_heap_alloc_bytes", nil, heap)
	b = promAppendHeader(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.")
	b = promAppendFloat(b, "process_start_time_seconds", nil, float64(m.start.UnixNano())/1e9)
	return b
}

// appendTo appends the histogram's samples: cumulative _bucket series with ascending
// le ending in +Inf, then _sum and _count, all from one snapshot so that the +Inf
// bucket equals _count.
func (h *promHistogram) appendTo(b []byte, name string) []byte {
	counts := make([]uint64, len(h.bounds)+1)
	sum := h.snapshotTo(counts)
	return promAppendHistogram(b, name, h.bounds, counts, sum)
}

// promAppendHistogram appends the samples of a histogram with per-bucket (not cumulative)
// counts, len(bounds)+1 of them.
func promAppendHistogram(b []byte, name string, bounds []float64, counts []uint64, sum float64) []byte {
	var cum uint64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(bounds) {
			le = strconv.FormatFloat(bounds[i], 'g', -1, 64)
		}
		b = promAppendUint(b, name+"_bucket", []string{"le", le}, cum)
	}
	b = promAppendFloat(b, name+"_sum", nil, sum)
	return promAppendUint(b, name+"_count", nil, cum)
}

// promRuntimeSamples reads the goroutine count and the bytes of live heap objects (what
// MemStats.HeapAlloc reports) from runtime/metrics, which, unlike
// runtime.ReadMemStats, does not stop the world.
func promRuntimeSamples() (goroutines, heap uint64) {
	s := []runtimemetrics.Sample{
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	runtimemetrics.Read(s)
	if s[0].Value.Kind() == runtimemetrics.KindUint64 {
		goroutines = s[0].Value.Uint64()
	} else {
		goroutines = uint64(goruntime.NumGoroutine())
	}
	if s[1].Value.Kind() == runtimemetrics.KindUint64 {
		heap = s[1].Value.Uint64()
	}
	return goroutines, heap
}

// promAppendHeader appends the HELP and TYPE lines of a family. HELP text escapes
// backslash and newline (format 0.0.4).
func promAppendHeader(b []byte, name, typ, help string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = promAppendEscaped(b, help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// promAppendSeries appends "name{l1="v1",...} " for label name/value pairs.
func promAppendSeries(b []byte, name string, labels []string) []byte {
	b = append(b, name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, '=', '"')
			b = promAppendEscaped(b, labels[i+1], true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ' ')
}

func promAppendUint(b []byte, name string, labels []string, v uint64) []byte {
	b = strconv.AppendUint(promAppendSeries(b, name, labels), v, 10)
	return append(b, '\n')
}

func promAppendInt(b []byte, name string, labels []string, v int64) []byte {
	b = strconv.AppendInt(promAppendSeries(b, name, labels), v, 10)
	return append(b, '\n')
}

// promAppendFloat appends a float sample; the format spells the specials +Inf, -Inf, NaN.
func promAppendFloat(b []byte, name string, labels []string, v float64) []byte {
	b = promAppendSeries(b, name, labels)
	switch {
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	default:
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, '\n')
}

// promAppendEscaped appends s with backslash and newline escaped, and the double quote
// too in a label value; invalid UTF-8 becomes U+FFFD, because the format is UTF-8.
func promAppendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}
