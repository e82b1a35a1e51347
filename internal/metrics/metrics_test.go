package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// families are the cairn families every scrape carries from the start, with their
// types, in the exposition's (alphabetical) order.
var families = []struct{ name, typ string }{
	{"cairn_audits_total", "counter"},
	{"cairn_broker_up", "gauge"},
	{"cairn_deletion_to_audit_seconds", "histogram"},
	{"cairn_deletions_total", "counter"},
	{"cairn_deletions_unknown_total", "counter"},
	{"cairn_erased_points_total", "counter"},
	{"cairn_erasure_requests_total", "counter"},
	{"cairn_erasure_seconds", "histogram"},
	{"cairn_erasures_pending", "gauge"},
	{"cairn_model_masked_landmarks", "gauge"},
	{"cairn_model_version", "gauge"},
	{"cairn_outbox_entries", "gauge"},
	{"cairn_pool_landmarks", "gauge"},
	{"cairn_pool_points", "gauge"},
	{"cairn_publish_retries_total", "counter"},
	{"cairn_query_seconds", "histogram"},
	{"cairn_refit_seconds", "histogram"},
	{"cairn_refits_total", "counter"},
}

// TestFreshFamilies: a fresh Set exposes every family without labels and the
// pre-created series at zero, with HELP and TYPE, and the Go runtime's and the
// process's families; the labeled families appear with their first series.
func TestFreshFamilies(t *testing.T) {
	s := New()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		got[mf.GetName()] = strings.ToLower(mf.GetType().String())
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", mf.GetName())
		}
	}
	for _, f := range families {
		if got[f.name] != f.typ {
			t.Errorf("family %s: type %q, want %s", f.name, got[f.name], f.typ)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_start_time_seconds"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if problems, err := testutil.GatherAndLint(s.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestExposition: after a scripted sequence of updates every family holds exactly the
// values the script implies (counters sum, gauges keep the last value, histograms
// bucket by upper bound with NaN dropped, refits classified by error).
func TestExposition(t *testing.T) {
	s := New()
	s.AddEvents("t.train", "applied", 5)
	s.AddEvents("t.train", "applied", 2)
	s.AddEvents("t.train", "dead_letter", 1)
	s.AddEvents("a.train", "skipped", 0)
	s.AddReject("bad_json", 3)
	s.SetLag("t.train", 10, 7)
	s.SetLag("t.train", 2, 9)
	s.SetLag("t.train", 2, 4)
	s.SetPool(1000, 64)
	s.SetResidual("a", 1.5, 100, true)
	s.SetResidual("b", math.Inf(1), 3, false)
	s.SetModel(3, 2)
	s.ObserveRefit(4, nil)
	s.ObserveRefit(1, fmt.Errorf("refit: %w", context.Canceled))
	s.ObserveRefit(0.3, errors.New("boom"))
	s.ObserveDeletion(true)
	s.ObserveDeletion(false)
	s.ObserveDeletion(false)
	s.ObserveAudit(12)
	s.ObserveUnknownDeletion()
	s.ObserveQuery(0.0005, "certified")
	s.ObserveQuery(0.003, "uncertified")
	s.ObserveQuery(7, "certified")
	s.SetOutbox(17)
	s.AddPublishRetry()
	s.AddPublishRetry()
	s.SetBrokerUp(true)
	s.AddFaultRetry("train")
	s.ObserveErasureRequest("erase", 100)
	s.ObserveErasureRequest("erase", 3)
	s.SetErasuresPending(1)
	s.ObserveErasure(2.5)
	s.ObserveErasure(5)

	want := `
# HELP cairn_events_total Input messages consumed, by topic and result (applied, dead_letter, skipped, missing).
# TYPE cairn_events_total counter
cairn_events_total{result="applied",topic="t.train"} 7
cairn_events_total{result="dead_letter",topic="t.train"} 1
cairn_events_total{result="skipped",topic="a.train"} 0
# HELP cairn_rejects_total Input messages rejected to the dead-letter topic, by reason.
# TYPE cairn_rejects_total counter
cairn_rejects_total{reason="bad_json"} 3
# HELP cairn_consumer_lag Input messages of a topic partition not yet applied.
# TYPE cairn_consumer_lag gauge
cairn_consumer_lag{partition="10",topic="t.train"} 7
cairn_consumer_lag{partition="2",topic="t.train"} 4
# HELP cairn_pool_points Stored training points.
# TYPE cairn_pool_points gauge
cairn_pool_points 1000
# HELP cairn_pool_landmarks Landmarks in the served pool.
# TYPE cairn_pool_landmarks gauge
cairn_pool_landmarks 64
# HELP cairn_residual_trace Residual certificate tr R of the served landmark pool, by view.
# TYPE cairn_residual_trace gauge
cairn_residual_trace{view="a"} 1.5
cairn_residual_trace{view="b"} +Inf
# HELP cairn_kernel_trace Trace tr K of the sketched kernel over the stored points, by view.
# TYPE cairn_kernel_trace gauge
cairn_kernel_trace{view="a"} 100
cairn_kernel_trace{view="b"} 3
# HELP cairn_residual_exact 1 when cairn_residual_trace is the exact tr R, 0 when it is an upper bound between syncs.
# TYPE cairn_residual_exact gauge
cairn_residual_exact{view="a"} 1
cairn_residual_exact{view="b"} 0
# HELP cairn_model_version Serving model version (0: none yet).
# TYPE cairn_model_version gauge
cairn_model_version 3
# HELP cairn_model_masked_landmarks Landmarks of the serving model deleted since its fit.
# TYPE cairn_model_masked_landmarks gauge
cairn_model_masked_landmarks 2
# HELP cairn_refits_total Refits finished, by result (ok, error, cancelled).
# TYPE cairn_refits_total counter
cairn_refits_total{result="cancelled"} 1
cairn_refits_total{result="error"} 1
cairn_refits_total{result="ok"} 1
# HELP cairn_queries_total Queries answered, by verdict.
# TYPE cairn_queries_total counter
cairn_queries_total{verdict="certified"} 2
cairn_queries_total{verdict="uncertified"} 1
# HELP cairn_deletions_total Deletions of stored points applied, by whether the point was a landmark.
# TYPE cairn_deletions_total counter
cairn_deletions_total{landmark="false"} 2
cairn_deletions_total{landmark="true"} 1
# HELP cairn_deletions_unknown_total Deletions of ids that were not stored (audited as known: false).
# TYPE cairn_deletions_unknown_total counter
cairn_deletions_unknown_total 1
# HELP cairn_audits_total Deletion audits emitted.
# TYPE cairn_audits_total counter
cairn_audits_total 1
# HELP cairn_outbox_entries Outputs waiting in the outbox for the broker.
# TYPE cairn_outbox_entries gauge
cairn_outbox_entries 17
# HELP cairn_publish_retries_total Failed rounds of publishing the outbox, each retried.
# TYPE cairn_publish_retries_total counter
cairn_publish_retries_total 2
# HELP cairn_broker_up 1 while the broker answers, 0 while it does not.
# TYPE cairn_broker_up gauge
cairn_broker_up 1
# HELP cairn_fault_retries_total Retries after a fault (a failed commit, a broken ingest, an unreachable broker), by component.
# TYPE cairn_fault_retries_total counter
cairn_fault_retries_total{component="train"} 1
# HELP cairn_erasure_requests_total Data subjects' requests applied, by op (erase, unblock).
# TYPE cairn_erasure_requests_total counter
cairn_erasure_requests_total{op="erase"} 2
cairn_erasure_requests_total{op="unblock"} 0
# HELP cairn_erased_points_total Points removed by data subjects' erasure requests.
# TYPE cairn_erased_points_total counter
cairn_erased_points_total 103
# HELP cairn_erasures_pending Data subjects' requests applied whose audit is not published yet.
# TYPE cairn_erasures_pending gauge
cairn_erasures_pending 1
# HELP cairn_query_seconds Latency of answering one query.
# TYPE cairn_query_seconds histogram
cairn_query_seconds_bucket{le="0.0005"} 1
cairn_query_seconds_bucket{le="0.001"} 1
cairn_query_seconds_bucket{le="0.002"} 1
cairn_query_seconds_bucket{le="0.005"} 2
cairn_query_seconds_bucket{le="0.01"} 2
cairn_query_seconds_bucket{le="0.02"} 2
cairn_query_seconds_bucket{le="0.05"} 2
cairn_query_seconds_bucket{le="0.1"} 2
cairn_query_seconds_bucket{le="0.2"} 2
cairn_query_seconds_bucket{le="0.5"} 2
cairn_query_seconds_bucket{le="1"} 2
cairn_query_seconds_bucket{le="2"} 2
cairn_query_seconds_bucket{le="5"} 2
cairn_query_seconds_bucket{le="+Inf"} 3
cairn_query_seconds_sum 7.0035
cairn_query_seconds_count 3
`
	names := []string{"cairn_events_total", "cairn_rejects_total", "cairn_consumer_lag", "cairn_pool_points", "cairn_pool_landmarks",
		"cairn_residual_trace", "cairn_kernel_trace", "cairn_residual_exact", "cairn_model_version", "cairn_model_masked_landmarks",
		"cairn_refits_total", "cairn_queries_total", "cairn_deletions_total", "cairn_deletions_unknown_total", "cairn_audits_total", "cairn_outbox_entries",
		"cairn_publish_retries_total", "cairn_broker_up", "cairn_fault_retries_total", "cairn_query_seconds",
		"cairn_erasure_requests_total", "cairn_erased_points_total", "cairn_erasures_pending"}
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The refit and audit histograms: count, sum and one bucket each.
	if got := testutil.CollectAndCount(s.refitSeconds); got != 1 {
		t.Errorf("refit histogram series: %d", got)
	}
	for _, tc := range []struct {
		h         interface{ Observe(float64) }
		name      string
		wantCount uint64
		wantSum   float64
	}{
		{s.refitSeconds, "cairn_refit_seconds", 3, 5.3},
		{s.auditSeconds, "cairn_deletion_to_audit_seconds", 1, 12},
		{s.erasureSeconds, "cairn_erasure_seconds", 2, 7.5},
	} {
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != tc.name {
				continue
			}
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != tc.wantCount || math.Abs(h.GetSampleSum()-tc.wantSum) > 1e-12 {
				t.Errorf("%s: count %d sum %v, want %d and %v", tc.name, h.GetSampleCount(), h.GetSampleSum(), tc.wantCount, tc.wantSum)
			}
		}
	}
}

// TestLabelValues: any label value, invalid UTF-8 included (replaced by U+FFFD), is
// recorded and escaped by the exposition, never a panic.
func TestLabelValues(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, `plain`},
		{`back\slash`, `back\slash`},
		{`"quoted"`, `"quoted"`},
		{"new\nline", "new\nline"},
		{"ünïcødé ✓", "ünïcødé ✓"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"", ""},
		{"} 1\n# TYPE x gauge", "} 1\n# TYPE x gauge"},
	} {
		s := New()
		s.AddReject(tc.in, 1)
		if got := testutil.ToFloat64(s.rejects.WithLabelValues(tc.want)); got != 1 {
			t.Errorf("reason %q: series %q = %v, want 1", tc.in, tc.want, got)
		}
		if n := testutil.CollectAndCount(s.rejects); n != 1 {
			t.Errorf("reason %q: %d series, want 1", tc.in, n)
		}
	}
}

// FuzzLabels: any topic or view round-trips through a scrape.
func FuzzLabels(f *testing.F) {
	for _, s := range []string{"", "a", `\`, `"`, "\n", "\\n", "\xff", "é", "} 1\n"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, topic, view string) {
		s := New()
		s.AddEvents(topic, "applied", 2)
		s.SetLag(topic, 1, 5)
		s.SetResidual(view, 1, 2, true)
		if got := testutil.ToFloat64(s.events.WithLabelValues(label(topic), "applied")); got != 2 {
			t.Errorf("events{topic=%q} = %v, want 2", topic, got)
		}
		if got := testutil.ToFloat64(s.kernel.WithLabelValues(label(view))); got != 2 {
			t.Errorf("kernel_trace{view=%q} = %v, want 2", view, got)
		}
		if _, err := s.Registry().Gather(); err != nil {
			t.Errorf("gather: %v", err)
		}
	})
}

func TestNegativeCountPanics(t *testing.T) {
	s := New()
	for name, f := range map[string]func(){
		"AddEvents": func() { s.AddEvents("t", "applied", -1) },
		"AddReject": func() { s.AddReject("r", -1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with n = -1 did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestConcurrent updates every metric from many goroutines while others scrape
// through the HTTP handler, then checks exact totals; run it with -race.
func TestConcurrent(t *testing.T) {
	const workers, iters = 8, 300
	s := New()
	h := s.Handler()
	stop := make(chan struct{})
	var scrapes sync.WaitGroup
	scrapes.Go(func() {
		for {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 200 {
				t.Errorf("scrape: %d %s", rec.Code, rec.Body)
				return
			}
			io.Copy(io.Discard, rec.Body)
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				topic := fmt.Sprintf("t%d", i%3)
				s.AddEvents(topic, "applied", 2)
				s.AddReject(fmt.Sprintf("r%d", i%5), 1)
				s.SetLag(topic, w, int64(i))
				var err error
				if i%3 == 1 {
					err = context.Canceled
				} else if i%3 == 2 {
					err = errors.New("x")
				}
				s.ObserveRefit(float64(i%7), err)
				s.ObserveQuery(0.001*float64(i%11), []string{"certified", "uncertified"}[i%2])
				s.ObserveDeletion(i%4 == 0)
				s.ObserveAudit(float64(i % 13))
			}
		})
	}
	wg.Wait()
	close(stop)
	scrapes.Wait()
	for _, tc := range []struct {
		got  float64
		want float64
		name string
	}{
		{testutil.ToFloat64(s.events.WithLabelValues("t0", "applied")), workers * iters / 3 * 2, "events t0"},
		{testutil.ToFloat64(s.rejects.WithLabelValues("r4")), workers * iters / 5, "rejects r4"},
		{testutil.ToFloat64(s.refits.WithLabelValues("ok")), workers * iters / 3, "refits ok"},
		{testutil.ToFloat64(s.refits.WithLabelValues("cancelled")), workers * iters / 3, "refits cancelled"},
		{testutil.ToFloat64(s.queries.WithLabelValues("certified")), workers * iters / 2, "queries certified"},
		{testutil.ToFloat64(s.deletions[1]), workers * iters / 4, "deletions landmark"},
		{testutil.ToFloat64(s.audits), workers * iters, "audits"},
		{testutil.ToFloat64(s.lag.WithLabelValues("t2", "5")), iters - 1, "lag t2/5"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestUpdatesDoNotAllocate: updating existing series allocates nothing, so the query
// and ingest paths pay only atomics for their metrics.
func TestUpdatesDoNotAllocate(t *testing.T) {
	s := New()
	topic, verdict := "cairn.train", "certified"
	s.AddEvents(topic, "applied", 1)
	s.AddReject("bad_json", 1)
	s.SetLag(topic, 3, 1)
	s.SetResidual("a", 1, 2, true)
	s.ObserveQuery(0.001, verdict)
	err := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		s.AddEvents(topic, "applied", 3)
		s.AddReject("bad_json", 1)
		s.SetPool(10, 2)
		s.SetResidual("a", 1, 2, false)
		s.SetModel(2, 1)
		s.ObserveRefit(1, err)
		s.ObserveQuery(0.003, verdict)
		s.ObserveDeletion(true)
		s.ObserveAudit(2)
		s.SetOutbox(3)
		s.SetBrokerUp(true)
	})
	if allocs != 0 {
		t.Errorf("updates allocate %v times per round, want 0", allocs)
	}
}

// BenchmarkObserveQuery reports one ObserveQuery (histogram plus labeled counter) as a
// ratio to one mutex-guarded increment timed in the same run.
func BenchmarkObserveQuery(b *testing.B) {
	s := New()
	var mu sync.Mutex
	var x uint64
	const baseN = 1 << 16
	t0 := time.Now()
	for range baseN {
		mu.Lock()
		x++
		mu.Unlock()
	}
	base := float64(time.Since(t0).Nanoseconds()) / baseN
	for b.Loop() {
		s.ObserveQuery(0.002, "certified")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x_mutex_incr")
	sink = x
}

var sink uint64

// BenchmarkScrape reports one scrape through the handler.
func BenchmarkScrape(b *testing.B) {
	s := New()
	for p := range 12 {
		s.SetLag("cairn.train", p, int64(p))
		s.AddEvents("cairn.train", "applied", p)
	}
	h := s.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		sink += uint64(rec.Body.Len())
	}
}
