package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Histogram bucket upper bounds, in seconds, on a 1-2-5 grid (each step ×2 or ×2.5) so
// that the le labels read as round numbers.
var (
	// A query is one feature map and a top-K over the pool: sub-millisecond on a small
	// pool, seconds only when something is wrong.
	QueryBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}
	// A refit is R fits of Adam over the pool: seconds to many minutes.
	RefitBuckets = []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	// A deletion's audit waits for the refit it triggers, or is immediate when the
	// deleted point was no landmark.
	AuditBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	// A data subject's erasure waits for the refit it triggers like a deletion, and
	// behind whatever the training reader has not read yet when the request arrives: up
	// to a day (a regulation's deadline is counted in days; the last bucket shows a miss).
	ErasureBuckets = []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}
)

// Set is the daemon's metrics and the registry that exposes them.
type Set struct {
	reg *prometheus.Registry

	events        *prometheus.CounterVec
	rejects       *prometheus.CounterVec
	lag           *prometheus.GaugeVec
	poolPoints    prometheus.Gauge
	poolLandmarks prometheus.Gauge
	residual      *prometheus.GaugeVec
	labelPoints   *prometheus.GaugeVec
	labelLandmark *prometheus.GaugeVec
	kernel        *prometheus.GaugeVec
	exact         *prometheus.GaugeVec
	modelVersion  prometheus.Gauge
	modelMasked   prometheus.Gauge
	refits        *prometheus.CounterVec
	refitSeconds  prometheus.Histogram
	queries       *prometheus.CounterVec
	querySeconds  prometheus.Histogram
	deletions     [2]prometheus.Counter // [0] landmark="false", [1] landmark="true"
	unknownDels   prometheus.Counter
	audits        prometheus.Counter
	auditSeconds  prometheus.Histogram

	outbox         prometheus.Gauge
	publishRetries prometheus.Counter
	brokerUp       prometheus.Gauge
	faultRetries   *prometheus.CounterVec

	leading   prometheus.Gauge
	takeovers prometheus.Histogram

	erasureRequests *prometheus.CounterVec
	erasedPoints    prometheus.Counter
	erasuresPending prometheus.Gauge
	erasureSeconds  prometheus.Histogram
}

// New returns a Set with every counter at zero, registered in a registry of its own
// together with the Go runtime collector and, where the platform has one, the process
// collector (process_start_time_seconds and the process's CPU and memory).
func New() *Set {
	s := &Set{reg: prometheus.NewRegistry()}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	s.events = counterVec("cairn_events_total", "Input messages consumed, by topic and result (applied, dead_letter, skipped, missing).", "topic", "result")
	s.rejects = counterVec("cairn_rejects_total", "Input messages rejected to the dead-letter topic, by reason.", "reason")
	s.lag = gaugeVec("cairn_consumer_lag", "Input messages of a topic partition not yet applied.", "topic", "partition")
	s.poolPoints = gauge("cairn_pool_points", "Stored training points.")
	s.poolLandmarks = gauge("cairn_pool_landmarks", "Landmarks in the served pool.")
	s.residual = gaugeVec("cairn_residual_trace", "Residual certificate tr R of the served landmark pool, by view.", "view")
	s.labelPoints = gaugeVec("cairn_points_by_label", "Stored training points by label (labelled points only).", "label")
	s.labelLandmark = gaugeVec("cairn_landmarks_by_label", "Landmarks of the served pool (both views) by their point's label.", "label")
	s.kernel = gaugeVec("cairn_kernel_trace", "Trace tr K of the sketched kernel over the stored points, by view.", "view")
	s.exact = gaugeVec("cairn_residual_exact", "1 when cairn_residual_trace is the exact tr R, 0 when it is an upper bound between syncs.", "view")
	s.modelVersion = gauge("cairn_model_version", "Serving model version (0: none yet).")
	s.modelMasked = gauge("cairn_model_masked_landmarks", "Landmarks of the serving model deleted since its fit.")
	s.refits = counterVec("cairn_refits_total", "Refits finished, by result (ok, error, cancelled).", "result")
	s.refitSeconds = histogram("cairn_refit_seconds", "Wall time of one refit, from its snapshot to its install or failure.", RefitBuckets)
	s.queries = counterVec("cairn_queries_total", "Queries answered, by verdict.", "verdict")
	s.querySeconds = histogram("cairn_query_seconds", "Latency of answering one query.", QueryBuckets)
	deletions := counterVec("cairn_deletions_total", "Deletions of stored points applied, by whether the point was a landmark.", "landmark")
	s.deletions = [2]prometheus.Counter{deletions.WithLabelValues("false"), deletions.WithLabelValues("true")}
	s.unknownDels = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_deletions_unknown_total", Help: "Deletions of ids that were not stored (audited as known: false)."})
	s.audits = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_audits_total", Help: "Deletion audits emitted."})
	s.auditSeconds = histogram("cairn_deletion_to_audit_seconds", "Time from applying a deletion to emitting its audit.", AuditBuckets)
	s.outbox = gauge("cairn_outbox_entries", "Outputs waiting in the outbox for the broker.")
	s.publishRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_publish_retries_total", Help: "Failed rounds of publishing the outbox, each retried."})
	s.brokerUp = gauge("cairn_broker_up", "1 while the broker answers, 0 while it does not.")
	s.faultRetries = counterVec("cairn_fault_retries_total", "Retries after a fault (a failed commit, a broken ingest, an unreachable broker), by component.", "component")
	s.leading = gauge("cairn_leading", "1 while this daemon is the deployment's writer (primary or elected standby), 0 otherwise.")
	s.takeovers = histogram("cairn_takeover_seconds", "Time an elected standby took to take over (adopt the audits, mask pending deletions).", AuditBuckets)
	s.erasureRequests = counterVec("cairn_erasure_requests_total", "Data subjects' requests applied, by op (erase, unblock).", "op")
	s.erasedPoints = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_erased_points_total", Help: "Points removed by data subjects' erasure requests."})
	s.erasuresPending = gauge("cairn_erasures_pending", "Data subjects' requests applied whose audit is not published yet.")
	s.erasureSeconds = histogram("cairn_erasure_seconds", "Time from an erasure request's Kafka timestamp to the broker's acknowledgement of its audit.", ErasureBuckets)
	for _, r := range []string{"cancelled", "error", "ok"} {
		s.refits.WithLabelValues(r)
	}
	for _, op := range []string{"erase", "unblock"} {
		s.erasureRequests.WithLabelValues(op)
	}
	s.reg.MustRegister(s.events, s.rejects, s.lag, s.poolPoints, s.poolLandmarks, s.residual, s.kernel, s.exact,
		s.labelPoints, s.labelLandmark,
		s.modelVersion, s.modelMasked, s.refits, s.refitSeconds, s.queries, s.querySeconds, deletions, s.unknownDels, s.audits,
		s.auditSeconds, s.outbox, s.publishRetries, s.brokerUp, s.faultRetries,
		s.leading, s.takeovers, s.erasureRequests, s.erasedPoints, s.erasuresPending, s.erasureSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// Registry is the registry every metric of s is registered in.
func (s *Set) Registry() *prometheus.Registry { return s.reg }

// Handler serves the registry for /metrics (promhttp: the text format, or protobuf
// when the scraper asks for it; a collection error is a 500).
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// AddEvents counts n consumed input messages of topic by result (applied,
// dead_letter, skipped or missing) in cairn_events_total. n = 0 creates the series at
// zero; a negative n panics (counters never decrease).
func (s *Set) AddEvents(topic, result string, n int) {
	s.events.WithLabelValues(label(topic), label(result)).Add(float64(n))
}

// AddReject counts n rejected inputs by reason in cairn_rejects_total.
func (s *Set) AddReject(reason string, n int) {
	s.rejects.WithLabelValues(label(reason)).Add(float64(n))
}

// SetLag sets cairn_consumer_lag, the messages of (topic, partition) not yet applied.
func (s *Set) SetLag(topic string, partition int, lag int64) {
	s.lag.WithLabelValues(label(topic), strconv.Itoa(partition)).Set(float64(lag))
}

// SetPool sets cairn_pool_points (stored points) and cairn_pool_landmarks (the served
// pool's size).
func (s *Set) SetPool(points, landmarks int) {
	s.poolPoints.Set(float64(points))
	s.poolLandmarks.Set(float64(landmarks))
}

// SetLabels sets cairn_points_by_label and cairn_landmarks_by_label from per-label
// counts of stored points and of landmarks; a label no longer counted is removed.
func (s *Set) SetLabels(points, landmarks map[int64]int) {
	s.labelPoints.Reset()
	s.labelLandmark.Reset()
	for l, n := range points {
		s.labelPoints.WithLabelValues(fmt.Sprint(l)).Set(float64(n))
		s.labelLandmark.WithLabelValues(fmt.Sprint(l)).Set(float64(landmarks[l]))
	}
}

// SetResidual sets the residual certificate of one view: cairn_residual_trace (tr R),
// cairn_kernel_trace (tr K) and cairn_residual_exact (1 when tr R is exact, 0 when it
// is an upper bound between syncs).
func (s *Set) SetResidual(view string, traceR, traceK float64, exact bool) {
	view = label(view)
	s.residual.WithLabelValues(view).Set(traceR)
	s.kernel.WithLabelValues(view).Set(traceK)
	e := 0.0
	if exact {
		e = 1
	}
	s.exact.WithLabelValues(view).Set(e)
}

// SetModel sets cairn_model_version (0: none yet) and cairn_model_masked_landmarks,
// the serving model's landmarks deleted since its fit.
func (s *Set) SetModel(version uint64, masked int) {
	s.modelVersion.Set(float64(version))
	s.modelMasked.Set(float64(masked))
}

// ObserveRefit records one finished refit: cairn_refits_total by result (ok when err
// is nil, cancelled when errors.Is(err, context.Canceled), error otherwise) and its
// duration in the cairn_refit_seconds histogram.
func (s *Set) ObserveRefit(seconds float64, err error) {
	result := "ok"
	switch {
	case errors.Is(err, context.Canceled):
		result = "cancelled"
	case err != nil:
		result = "error"
	}
	s.refits.WithLabelValues(result).Inc()
	s.refitSeconds.Observe(seconds)
}

// ObserveQuery records one answered query: its latency in the cairn_query_seconds
// histogram and cairn_queries_total by verdict.
func (s *Set) ObserveQuery(seconds float64, verdict string) {
	s.querySeconds.Observe(seconds)
	s.queries.WithLabelValues(label(verdict)).Inc()
}

// ObserveDeletion counts one applied deletion of a stored point in
// cairn_deletions_total, by whether the point was a landmark of the served pool.
func (s *Set) ObserveDeletion(wasLandmark bool) {
	if wasLandmark {
		s.deletions[1].Inc()
	} else {
		s.deletions[0].Inc()
	}
}

// ObserveUnknownDeletion counts one delete of an id that was not stored.
func (s *Set) ObserveUnknownDeletion() { s.unknownDels.Inc() }

// ObserveAudit records one emitted deletion audit: cairn_audits_total and the time
// from the deletion's application to its audit in cairn_deletion_to_audit_seconds.
func (s *Set) ObserveAudit(deletionToAuditSeconds float64) {
	s.audits.Inc()
	s.auditSeconds.Observe(deletionToAuditSeconds)
}

// SetOutbox sets cairn_outbox_entries, the outputs waiting for the broker.
func (s *Set) SetOutbox(n int) { s.outbox.Set(float64(n)) }

// AddPublishRetry counts one failed, retried round of publishing the outbox.
func (s *Set) AddPublishRetry() { s.publishRetries.Inc() }

// SetBrokerUp sets cairn_broker_up.
func (s *Set) SetBrokerUp(up bool) {
	v := 0.0
	if up {
		v = 1
	}
	s.brokerUp.Set(v)
}

// AddFaultRetry counts one retry of component after a fault.
func (s *Set) AddFaultRetry(component string) { s.faultRetries.WithLabelValues(label(component)).Inc() }

// label is v with invalid UTF-8 replaced by U+FFFD: client_golang refuses (panics on)
// a label value that is not UTF-8, and a topic name comes from outside.
func label(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

// SetLeading sets cairn_leading.
func (s *Set) SetLeading(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	s.leading.Set(v)
}

// ObserveTakeover records one takeover's duration.
func (s *Set) ObserveTakeover(seconds float64) { s.takeovers.Observe(seconds) }

// ObserveErasureRequest counts one applied request of a data subject by op (erase or
// unblock) in cairn_erasure_requests_total, and the points it erased in
// cairn_erased_points_total.
func (s *Set) ObserveErasureRequest(op string, points int) {
	s.erasureRequests.WithLabelValues(label(op)).Inc()
	s.erasedPoints.Add(float64(points))
}

// SetErasuresPending sets cairn_erasures_pending, the subjects' requests applied whose
// audit is not published yet.
func (s *Set) SetErasuresPending(n int) { s.erasuresPending.Set(float64(n)) }

// ObserveErasure records one published erasure audit: the time from its request's Kafka
// timestamp to the broker's acknowledgement of the audit, in cairn_erasure_seconds.
func (s *Set) ObserveErasure(seconds float64) { s.erasureSeconds.Observe(seconds) }
