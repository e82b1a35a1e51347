package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// promSample is one parsed sample line.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// promFamily is one parsed metric family.
type promFamily struct {
	typ, help string
	samples   []promSample
}

var (
	promMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promLabelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseProm is a strict parser of the text exposition format 0.0.4, restricted to what
// a correct writer of counters, gauges and histograms without timestamps produces. It
// returns an error for: a line that is not HELP, TYPE or a sample; bad metric or label
// names; a label value with an escape other than \\, \" and \n, or invalid UTF-8;
// duplicate label names; an unparseable value; a sample whose family has no preceding
// TYPE; HELP or TYPE repeated; a family that reappears after another started; a
// duplicate series; a negative or non-integral counter; and, per histogram series,
// buckets whose le values are not strictly ascending and ending in +Inf, whose counts
// decrease, whose +Inf bucket differs from _count, or a missing _sum or _count.
func parseProm(text string) (map[string]*promFamily, []string, error) {
	fams := map[string]*promFamily{}
	var order []string
	seen := map[string]bool{}
	cur := ""
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, nil, errors.New("exposition does not end in a newline")
	}
	start := func(name string) error {
		if name == cur {
			return nil
		}
		if _, ok := fams[name]; ok {
			return fmt.Errorf("family %s reappears after %s", name, cur)
		}
		fams[name] = &promFamily{}
		order = append(order, name)
		cur = name
		return nil
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if text == "" {
			break
		}
		fail := func(format string, args ...any) (map[string]*promFamily, []string, error) {
			return nil, nil, fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if !promMetricName.MatchString(name) {
				return fail("bad metric name")
			}
			if err := start(name); err != nil {
				return fail("%v", err)
			}
			f := fams[name]
			if f.help != "" || f.typ != "" || len(f.samples) > 0 {
				return fail("HELP after HELP, TYPE or samples")
			}
			h, err := promUnescape(help, false)
			if err != nil {
				return fail("%v", err)
			}
			f.help = h
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if !promMetricName.MatchString(name) {
				return fail("bad metric name")
			}
			if err := start(name); err != nil {
				return fail("%v", err)
			}
			f := fams[name]
			if f.typ != "" || len(f.samples) > 0 {
				return fail("TYPE repeated or after samples")
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				return fail("unknown type %q", typ)
			}
			f.typ = typ
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			return fail("not a HELP, TYPE or sample line")
		}
		s, err := promParseSample(line)
		if err != nil {
			return fail("%v", err)
		}
		fam := s.name
		if f := fams[cur]; f != nil && f.typ == "histogram" {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if s.name == cur+suf {
					fam = cur
				}
			}
		}
		f := fams[fam]
		if fam != cur || f == nil || f.typ == "" {
			return fail("sample of %s without a preceding TYPE in its family", s.name)
		}
		if f.typ == "histogram" && fam == s.name {
			return fail("histogram sample without _bucket, _sum or _count suffix")
		}
		if f.typ != "histogram" && fam != s.name {
			return fail("sample name differs from family")
		}
		key := promSeriesKey(s.name, s.labels, "")
		if seen[key] {
			return fail("duplicate series")
		}
		seen[key] = true
		if f.typ == "counter" && (s.value < 0 || s.value != math.Trunc(s.value)) {
			return fail("counter value %v", s.value)
		}
		f.samples = append(f.samples, s)
	}
	for _, name := range order {
		f := fams[name]
		if f.typ == "" {
			return nil, nil, fmt.Errorf("family %s has no TYPE", name)
		}
		if f.typ == "histogram" {
			if err := promCheckHistogram(name, f.samples); err != nil {
				return nil, nil, err
			}
		}
	}
	return fams, order, nil
}

func promSeriesKey(name string, labels map[string]string, drop string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != drop {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s\x00%s", k, labels[k])
	}
	return b.String()
}

func promCheckHistogram(name string, samples []promSample) error {
	type series struct {
		les      []float64
		counts   []float64
		sum, cnt *float64
	}
	all := map[string]*series{}
	get := func(s promSample) *series {
		k := promSeriesKey("", s.labels, "le")
		if all[k] == nil {
			all[k] = &series{}
		}
		return all[k]
	}
	for _, s := range samples {
		h := get(s)
		switch s.name {
		case name + "_bucket":
			le, ok := s.labels["le"]
			if !ok {
				return fmt.Errorf("%s: bucket without le", name)
			}
			v, err := promParseFloat(le)
			if err != nil {
				return fmt.Errorf("%s: le %q: %v", name, le, err)
			}
			if n := len(h.les); n > 0 && !(v > h.les[n-1]) {
				return fmt.Errorf("%s: le %v not above %v", name, v, h.les[n-1])
			}
			if n := len(h.counts); n > 0 && s.value < h.counts[n-1] {
				return fmt.Errorf("%s: bucket le=%v count %v below previous %v", name, v, s.value, h.counts[n-1])
			}
			if h.sum != nil || h.cnt != nil {
				return fmt.Errorf("%s: bucket after _sum or _count", name)
			}
			h.les = append(h.les, v)
			h.counts = append(h.counts, s.value)
		case name + "_sum":
			v := s.value
			h.sum = &v
		case name + "_count":
			v := s.value
			h.cnt = &v
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("%s: histogram without samples", name)
	}
	for k, h := range all {
		switch {
		case len(h.les) == 0 || !math.IsInf(h.les[len(h.les)-1], 1):
			return fmt.Errorf("%s%q: buckets do not end in +Inf", name, k)
		case h.sum == nil || h.cnt == nil:
			return fmt.Errorf("%s%q: missing _sum or _count", name, k)
		case h.counts[len(h.counts)-1] != *h.cnt:
			return fmt.Errorf("%s%q: +Inf bucket %v != _count %v", name, k, h.counts[len(h.counts)-1], *h.cnt)
		}
	}
	return nil
}

func promParseFloat(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if strings.ContainsAny(s, "iInN") { // strconv accepts "inf", "Infinity", "nan"
		return 0, fmt.Errorf("bad float %q", s)
	}
	return strconv.ParseFloat(s, 64)
}

func promUnescape(s string, quoted bool) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("invalid UTF-8")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && quoted {
			return "", errors.New("unescaped quote")
		}
		if c == '\n' {
			return "", errors.New("raw newline")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("dangling backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quoted {
				return "", errors.New(`\" in HELP`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("bad escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

func promParseSample(line string) (promSample, error) {
	s := promSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, errors.New("no value")
	}
	s.name = line[:i]
	if !promMetricName.MatchString(s.name) {
		return s, errors.New("bad metric name")
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, errors.New("label without =\"")
			}
			ln := rest[:eq]
			if !promLabelName.MatchString(ln) {
				return s, fmt.Errorf("bad label name %q", ln)
			}
			rest = rest[eq+2:]
			end := -1
			for j := 0; j < len(rest); j++ {
				if rest[j] == '\\' {
					j++
					continue
				}
				if rest[j] == '"' {
					end = j
					break
				}
			}
			if end < 0 {
				return s, errors.New("unterminated label value")
			}
			v, err := promUnescape(rest[:end], true)
			if err != nil {
				return s, fmt.Errorf("label %s: %v", ln, err)
			}
			if _, dup := s.labels[ln]; dup {
				return s, fmt.Errorf("duplicate label %s", ln)
			}
			s.labels[ln] = v
			rest = rest[end+1:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return s, errors.New("expected , or } after label")
			}
		}
	}
	val, ok := strings.CutPrefix(rest, " ")
	if !ok || strings.Contains(val, " ") {
		return s, errors.New("want exactly one space then the value (no timestamp)")
	}
	v, err := promParseFloat(val)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// promValue returns the value of the series name{labels} and whether it exists.
func promValue(fams map[string]*promFamily, family, name string, labels ...string) (float64, bool) {
	f := fams[family]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, s := range f.samples {
		if s.name == name && promSeriesKey("", s.labels, "") == promSeriesKey("", want, "") {
			return s.value, true
		}
	}
	return 0, false
}

func promScrape(t testing.TB, m *Metrics) (string, map[string]*promFamily, []string) {
	t.Helper()
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	fams, order, err := parseProm(buf.String())
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, buf.String())
	}
	return buf.String(), fams, order
}

// TestMetricsParserRejects makes sure the strict parser used by the other tests can
// fail: each input breaks exactly one rule.
func TestMetricsParserRejects(t *testing.T) {
	const h = "# TYPE h histogram\n"
	for _, tc := range []struct{ name, text string }{
		{"no TYPE", "a 1\n"},
		{"no trailing newline", "# TYPE a gauge\na 1"},
		{"TYPE after sample", "# TYPE a gauge\na 1\n# TYPE a gauge\n"},
		{"family reappears", "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# HELP a x\n"},
		{"sample of another family", "# TYPE a gauge\n# TYPE b gauge\na 1\n"},
		{"bad escape", "# TYPE a gauge\na{l=\"x\\t\"} 1\n"},
		{"unescaped quote", "# TYPE a gauge\na{l=\"x\"y\"} 1\n"},
		{"duplicate label", "# TYPE a gauge\na{l=\"x\",l=\"y\"} 1\n"},
		{"duplicate series", "# TYPE a gauge\na{l=\"x\"} 1\na{l=\"x\"} 2\n"},
		{"bad label name", "# TYPE a gauge\na{0l=\"x\"} 1\n"},
		{"bad value", "# TYPE a gauge\na 1x\n"},
		{"timestamp", "# TYPE a gauge\na 1 123\n"},
		{"negative counter", "# TYPE a counter\na -1\n"},
		{"empty line", "# TYPE a gauge\n\na 1\n"},
		{"buckets not cumulative", h + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"le not ascending", h + "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"no +Inf", h + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"},
		{"+Inf != count", h + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n"},
		{"no count", h + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\n"},
		{"histogram bare name", h + "h 1\n"},
		{"invalid UTF-8", "# TYPE a gauge\na{l=\"\xff\"} 1\n"},
	} {
		if _, _, err := parseProm(tc.text); err == nil {
			t.Errorf("%s: parseProm accepted %q", tc.name, tc.text)
		}
	}
	good := "# HELP a x\\\\y\\nz\n# TYPE a gauge\na{l=\"q\\\"\\\\\\n\"} NaN\n" + h +
		"h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n"
	fams, _, err := parseProm(good)
	if err != nil {
		t.Fatalf("parseProm rejected a valid exposition: %v", err)
	}
	if got, want := fams["a"].help, "x\\y\nz"; got != want {
		t.Errorf("help = %q, want %q", got, want)
	}
	if got, want := fams["a"].samples[0].labels["l"], "q\"\\\n"; got != want {
		t.Errorf("label = %q, want %q", got, want)
	}
}

// promWantFamilies are the families WriteTo writes, in order, with their types.
var promWantFamilies = []struct{ name, typ string }{
	{"cairn_audits_total", "counter"},
	{"cairn_consumer_lag", "gauge"},
	{"cairn_deletion_to_audit_seconds", "histogram"},
	{"cairn_deletions_total", "counter"},
	{"cairn_events_total", "counter"},
	{"cairn_kernel_trace", "gauge"},
	{"cairn_model_masked_landmarks", "gauge"},
	{"cairn_model_version", "gauge"},
	{"cairn_pool_landmarks", "gauge"},
	{"cairn_pool_points", "gauge"},
	{"cairn_queries_total", "counter"},
	{"cairn_query_seconds", "histogram"},
	{"cairn_refit_seconds", "histogram"},
	{"cairn_refits_total", "counter"},
	{"cairn_rejects_total", "counter"},
	{"cairn_residual_exact", "gauge"},
	{"cairn_residual_trace", "gauge"},
	{"go_goroutines", "gauge"},
	{"go_memstats_heap_alloc_bytes", "gauge"},
	{"process_start_time_seconds", "gauge"},
}

func TestMetricsExposition(t *testing.T) {
	m := NewMetrics()
	_, fams, order := promScrape(t, m)
	var names []string
	for _, f := range promWantFamilies {
		names = append(names, f.name)
		if fams[f.name] == nil || fams[f.name].typ != f.typ || fams[f.name].help == "" {
			t.Errorf("fresh metrics: family %s = %+v, want type %s with HELP", f.name, fams[f.name], f.typ)
		}
	}
	if !slices.Equal(order, names) {
		t.Errorf("family order = %v, want %v", order, names)
	}

	m.AddEvents("t.train", "applied", 5)
	m.AddEvents("t.train", "applied", 2)
	m.AddEvents("t.train", "dead_letter", 1)
	m.AddEvents("a.train", "skipped", 0)
	m.AddReject("bad_json", 3)
	m.SetLag("t.train", 10, 7)
	m.SetLag("t.train", 2, 9)
	m.SetLag("t.train", 2, 4) // a gauge keeps the last value
	m.SetPool(1000, 64)
	m.SetResidual("a", 1.5, 100, true)
	m.SetResidual("b", math.Inf(1), math.NaN(), false)
	m.SetModel(3, 2)
	m.ObserveRefit(4, nil)
	m.ObserveRefit(1, fmt.Errorf("refit: %w", context.Canceled))
	m.ObserveRefit(0.3, errors.New("boom"))
	m.ObserveRefit(0.3, context.DeadlineExceeded)
	m.ObserveDeletion(true)
	m.ObserveDeletion(false)
	m.ObserveDeletion(false)
	m.ObserveAudit(12)
	queries := []float64{0.0001, 0.0005, 0.001, 0.0011, 0.3, 7, math.Inf(1), -1}
	for i, q := range queries {
		m.ObserveQuery(q, []string{"certified", "uncertified"}[i%2])
	}
	m.ObserveQuery(math.NaN(), "fit_limited") // dropped by the histogram, counted by verdict

	text, fams, _ := promScrape(t, m)
	for _, tc := range []struct {
		family, name string
		labels       []string
		want         float64
	}{
		{"cairn_events_total", "cairn_events_total", []string{"topic", "t.train", "result", "applied"}, 7},
		{"cairn_events_total", "cairn_events_total", []string{"topic", "t.train", "result", "dead_letter"}, 1},
		{"cairn_events_total", "cairn_events_total", []string{"topic", "a.train", "result", "skipped"}, 0},
		{"cairn_rejects_total", "cairn_rejects_total", []string{"reason", "bad_json"}, 3},
		{"cairn_consumer_lag", "cairn_consumer_lag", []string{"topic", "t.train", "partition", "10"}, 7},
		{"cairn_consumer_lag", "cairn_consumer_lag", []string{"topic", "t.train", "partition", "2"}, 4},
		{"cairn_pool_points", "cairn_pool_points", nil, 1000},
		{"cairn_pool_landmarks", "cairn_pool_landmarks", nil, 64},
		{"cairn_residual_trace", "cairn_residual_trace", []string{"view", "a"}, 1.5},
		{"cairn_kernel_trace", "cairn_kernel_trace", []string{"view", "a"}, 100},
		{"cairn_residual_exact", "cairn_residual_exact", []string{"view", "a"}, 1},
		{"cairn_residual_exact", "cairn_residual_exact", []string{"view", "b"}, 0},
		{"cairn_residual_trace", "cairn_residual_trace", []string{"view", "b"}, math.Inf(1)},
		{"cairn_model_version", "cairn_model_version", nil, 3},
		{"cairn_model_masked_landmarks", "cairn_model_masked_landmarks", nil, 2},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "ok"}, 1},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "cancelled"}, 1},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "error"}, 2},
		{"cairn_refit_seconds", "cairn_refit_seconds_count", nil, 4},
		{"cairn_refit_seconds", "cairn_refit_seconds_sum", nil, 5.6},
		{"cairn_refit_seconds", "cairn_refit_seconds_bucket", []string{"le", "0.2"}, 0},
		{"cairn_refit_seconds", "cairn_refit_seconds_bucket", []string{"le", "0.5"}, 2},
		{"cairn_refit_seconds", "cairn_refit_seconds_bucket", []string{"le", "1"}, 3},
		{"cairn_refit_seconds", "cairn_refit_seconds_bucket", []string{"le", "5"}, 4},
		{"cairn_deletions_total", "cairn_deletions_total", []string{"landmark", "true"}, 1},
		{"cairn_deletions_total", "cairn_deletions_total", []string{"landmark", "false"}, 2},
		{"cairn_audits_total", "cairn_audits_total", nil, 1},
		{"cairn_deletion_to_audit_seconds", "cairn_deletion_to_audit_seconds_count", nil, 1},
		{"cairn_deletion_to_audit_seconds", "cairn_deletion_to_audit_seconds_bucket", []string{"le", "10"}, 0},
		{"cairn_deletion_to_audit_seconds", "cairn_deletion_to_audit_seconds_bucket", []string{"le", "20"}, 1},
		{"cairn_queries_total", "cairn_queries_total", []string{"verdict", "certified"}, 4},
		{"cairn_queries_total", "cairn_queries_total", []string{"verdict", "uncertified"}, 4},
		{"cairn_queries_total", "cairn_queries_total", []string{"verdict", "fit_limited"}, 1},
		{"cairn_query_seconds", "cairn_query_seconds_count", nil, float64(len(queries))},
	} {
		got, ok := promValue(fams, tc.family, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if got, ok := promValue(fams, "cairn_kernel_trace", "cairn_kernel_trace", "view", "b"); !ok || !math.IsNaN(got) {
		t.Errorf("cairn_kernel_trace{view=b} = %v, want NaN", got)
	}
	if got, _ := promValue(fams, "cairn_query_seconds", "cairn_query_seconds_sum"); !math.IsInf(got, 1) {
		t.Errorf("cairn_query_seconds_sum = %v, want +Inf (an +Inf observation)", got)
	}
	// Every query bucket against a direct count of observations <= le (le is inclusive).
	for _, s := range fams["cairn_query_seconds"].samples {
		if s.name != "cairn_query_seconds_bucket" {
			continue
		}
		le, _ := promParseFloat(s.labels["le"])
		want := 0
		for _, q := range queries {
			if q <= le {
				want++
			}
		}
		if s.value != float64(want) {
			t.Errorf("cairn_query_seconds_bucket{le=%q} = %v, want %d", s.labels["le"], s.value, want)
		}
	}
	if got, want := len(fams["cairn_query_seconds"].samples), len(queryBuckets)+3; got != want {
		t.Errorf("cairn_query_seconds has %d samples, want %d", got, want)
	}
	if queryBuckets[0] != 0.0005 || queryBuckets[len(queryBuckets)-1] != 5 {
		t.Errorf("query buckets %v, want 0.5 ms to 5 s", queryBuckets)
	}
	for _, bs := range [][]float64{queryBuckets, refitBuckets, auditBuckets} {
		for i := 1; i < len(bs); i++ {
			if r := bs[i] / bs[i-1]; r < 1.9 || r > 2.6 {
				t.Errorf("buckets %v: step %v/%v = %v, want about 2", bs, bs[i], bs[i-1], r)
			}
		}
	}
	// Series order within families: labels ascending, partitions numerically.
	for _, frag := range []string{
		"cairn_consumer_lag{topic=\"t.train\",partition=\"2\"} 4\ncairn_consumer_lag{topic=\"t.train\",partition=\"10\"} 7\n",
		"cairn_events_total{topic=\"a.train\",result=\"skipped\"} 0\ncairn_events_total{topic=\"t.train\",result=\"applied\"} 7\n",
		"cairn_refits_total{result=\"cancelled\"} 1\ncairn_refits_total{result=\"error\"} 2\ncairn_refits_total{result=\"ok\"} 1\n",
		"cairn_query_seconds_bucket{le=\"0.0005\"} 3\n",
		"cairn_query_seconds_bucket{le=\"+Inf\"} 8\ncairn_query_seconds_sum +Inf\ncairn_query_seconds_count 8\n",
	} {
		if !strings.Contains(text, frag) {
			t.Errorf("exposition lacks %q", frag)
		}
	}
	if got, _ := promValue(fams, "go_goroutines", "go_goroutines"); got < 1 {
		t.Errorf("go_goroutines = %v, want >= 1", got)
	}
	if got, _ := promValue(fams, "go_memstats_heap_alloc_bytes", "go_memstats_heap_alloc_bytes"); got <= 0 {
		t.Errorf("go_memstats_heap_alloc_bytes = %v, want > 0", got)
	}
	start, _ := promValue(fams, "process_start_time_seconds", "process_start_time_seconds")
	if want := float64(m.start.UnixNano()) / 1e9; start != want {
		t.Errorf("process_start_time_seconds = %v, want %v", start, want)
	}
}

// promStripProcess removes the go_ and process_ families, whose values change by
// themselves between scrapes.
func promStripProcess(text string) string {
	var out []string
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "go_") || strings.HasPrefix(l, "process_") ||
			strings.HasPrefix(l, "# HELP go_") || strings.HasPrefix(l, "# TYPE go_") ||
			strings.HasPrefix(l, "# HELP process_") || strings.HasPrefix(l, "# TYPE process_") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// TestMetricsDeterministic checks that the exposition depends on the state only, not
// on the order in which series were created.
func TestMetricsDeterministic(t *testing.T) {
	type op func(*Metrics)
	ops := []op{
		func(m *Metrics) { m.AddEvents("t", "applied", 1) },
		func(m *Metrics) { m.AddEvents("s", "applied", 1) },
		func(m *Metrics) { m.AddEvents("t", "missing", 1) },
		func(m *Metrics) { m.SetLag("t", 11, 1) },
		func(m *Metrics) { m.SetLag("t", 3, 1) },
		func(m *Metrics) { m.SetLag("s", 30, 1) },
		func(m *Metrics) { m.AddReject("z", 1) },
		func(m *Metrics) { m.AddReject("y", 1) },
		func(m *Metrics) { m.SetResidual("b", 1, 2, true) },
		func(m *Metrics) { m.SetResidual("a", 3, 4, false) },
		func(m *Metrics) { m.ObserveQuery(0.01, "uncertified") },
		func(m *Metrics) { m.ObserveQuery(0.02, "certified") },
	}
	a, b := NewMetrics(), NewMetrics()
	for _, f := range ops {
		f(a)
	}
	for i := len(ops) - 1; i >= 0; i-- {
		ops[i](b)
	}
	ta, _, _ := promScrape(t, a)
	tb, _, _ := promScrape(t, b)
	if promStripProcess(ta) != promStripProcess(tb) {
		t.Errorf("expositions differ:\n%s\n----\n%s", promStripProcess(ta), promStripProcess(tb))
	}
	if ta2, _, _ := promScrape(t, a); promStripProcess(ta2) != promStripProcess(ta) {
		t.Errorf("second scrape differs from first")
	}
}

func TestMetricsLabelEscaping(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, `plain`},
		{`back\slash`, `back\slash`},
		{`"quoted"`, `"quoted"`},
		{"new\nline", "new\nline"},
		{"\\\"\n\\n", "\\\"\n\\n"},
		{"ünïcødé ✓", "ünïcødé ✓"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"", ""},
		{"} 1\n# TYPE x gauge", "} 1\n# TYPE x gauge"},
	} {
		m := NewMetrics()
		m.AddReject(tc.in, 1)
		_, fams, _ := promScrape(t, m)
		s := fams["cairn_rejects_total"].samples
		if len(s) != 1 || s[0].labels["reason"] != tc.want || s[0].value != 1 {
			t.Errorf("reason %q: got samples %+v, want one with reason %q", tc.in, s, tc.want)
		}
	}
}

// FuzzMetricsLabels checks that any label value (the writer's only outside-looking
// input) round-trips through the exposition and never breaks its grammar.
func FuzzMetricsLabels(f *testing.F) {
	for _, s := range []string{"", "a", `\`, `"`, "\n", "\\n", "\xff", "é", "} 1\n"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, topic, view string) {
		m := NewMetrics()
		m.AddEvents(topic, "applied", 2)
		m.SetLag(topic, 1, 5)
		m.SetResidual(view, 1, 2, true)
		_, fams, _ := promScrape(t, m)
		want := strings.ToValidUTF8(topic, "\uFFFD")
		if v, ok := promValue(fams, "cairn_events_total", "cairn_events_total", "topic", want, "result", "applied"); !ok || v != 2 {
			t.Errorf("events{topic=%q} = %v, %v; want 2", want, v, ok)
		}
		wantView := strings.ToValidUTF8(view, "\uFFFD")
		if v, ok := promValue(fams, "cairn_kernel_trace", "cairn_kernel_trace", "view", wantView); !ok || v != 2 {
			t.Errorf("kernel_trace{view=%q} = %v, %v; want 2", wantView, v, ok)
		}
	})
}

func TestMetricsNegativeCountPanics(t *testing.T) {
	m := NewMetrics()
	for name, f := range map[string]func(){
		"AddEvents": func() { m.AddEvents("t", "applied", -1) },
		"AddReject": func() { m.AddReject("r", -1) },
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

// TestMetricsConcurrent updates every metric from many goroutines while others
// scrape, then checks exact totals; run it with -race.
func TestMetricsConcurrent(t *testing.T) {
	const workers, iters = 8, 300
	m := NewMetrics()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var scrapeErr error
	var scrapes sync.WaitGroup
	scrapes.Go(func() {
		for {
			var buf bytes.Buffer
			if _, err := m.WriteTo(&buf); err != nil {
				scrapeErr = err
				return
			}
			if _, _, err := parseProm(buf.String()); err != nil {
				scrapeErr = err
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				topic := fmt.Sprintf("t%d", i%3)
				m.AddEvents(topic, "applied", 2)
				m.AddReject(fmt.Sprintf("r%d", i%5), 1)
				m.SetLag(topic, w, int64(i))
				m.SetPool(i, w)
				m.SetResidual([]string{"a", "b"}[i%2], float64(i), float64(i+1), i%2 == 0)
				m.SetModel(uint64(i), w)
				var err error
				if i%3 == 1 {
					err = context.Canceled
				} else if i%3 == 2 {
					err = errors.New("x")
				}
				m.ObserveRefit(float64(i%7), err)
				m.ObserveQuery(0.001*float64(i%11), []string{"certified", "uncertified"}[i%2])
				m.ObserveDeletion(i%4 == 0)
				m.ObserveAudit(float64(i % 13))
			}
		})
	}
	wg.Wait()
	close(stop)
	scrapes.Wait()
	if scrapeErr != nil {
		t.Fatalf("concurrent scrape: %v", scrapeErr)
	}
	_, fams, _ := promScrape(t, m)
	// Each worker's iterations split evenly over i%k classes since iters is a multiple
	// of 3, 5, 2 and 4 (300 = 2²·3·5²); the sums are counted the same way.
	var querySum, refitSum, auditSum float64
	for i := range iters {
		querySum += 0.001 * float64(i%11)
		refitSum += float64(i % 7)
		auditSum += float64(i % 13)
	}
	for _, tc := range []struct {
		family, name string
		labels       []string
		want         float64
	}{
		{"cairn_events_total", "cairn_events_total", []string{"topic", "t0", "result", "applied"}, workers * iters / 3 * 2},
		{"cairn_events_total", "cairn_events_total", []string{"topic", "t2", "result", "applied"}, workers * iters / 3 * 2},
		{"cairn_rejects_total", "cairn_rejects_total", []string{"reason", "r4"}, workers * iters / 5},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "ok"}, workers * iters / 3},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "cancelled"}, workers * iters / 3},
		{"cairn_refits_total", "cairn_refits_total", []string{"result", "error"}, workers * iters / 3},
		{"cairn_refit_seconds", "cairn_refit_seconds_count", nil, workers * iters},
		{"cairn_queries_total", "cairn_queries_total", []string{"verdict", "certified"}, workers * iters / 2},
		{"cairn_query_seconds", "cairn_query_seconds_count", nil, workers * iters},
		{"cairn_deletions_total", "cairn_deletions_total", []string{"landmark", "true"}, workers * iters / 4},
		{"cairn_deletions_total", "cairn_deletions_total", []string{"landmark", "false"}, workers * iters * 3 / 4},
		{"cairn_audits_total", "cairn_audits_total", nil, workers * iters},
		{"cairn_pool_points", "cairn_pool_points", nil, iters - 1}, // every worker's last SetPool
		{"cairn_consumer_lag", "cairn_consumer_lag", []string{"topic", "t2", "partition", "5"}, iters - 1},
	} {
		got, ok := promValue(fams, tc.family, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// Sums of floats added in a racing order: relative error at most n·ε with n = 2400
	// additions of non-negative terms, so 1e-12 is ample.
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"cairn_query_seconds", workers * querySum},
		{"cairn_refit_seconds", workers * refitSum},
		{"cairn_deletion_to_audit_seconds", workers * auditSum},
	} {
		got, _ := promValue(fams, tc.name, tc.name+"_sum")
		if math.Abs(got-tc.want) > 1e-12*tc.want {
			t.Errorf("%s_sum = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMetricsUpdatesDoNotAllocate checks the hot-path promise: updating existing
// series allocates nothing.
func TestMetricsUpdatesDoNotAllocate(t *testing.T) {
	m := NewMetrics()
	topic, verdict := "cairn.train", "certified"
	m.AddEvents(topic, "applied", 1)
	m.AddReject("bad_json", 1)
	m.SetLag(topic, 3, 1)
	m.SetResidual("a", 1, 2, true)
	m.ObserveQuery(0.001, verdict)
	err := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		m.AddEvents(topic, "applied", 3)
		m.AddReject("bad_json", 1)
		m.SetLag(topic, 3, 7)
		m.SetPool(10, 2)
		m.SetResidual("a", 1, 2, false)
		m.SetModel(2, 1)
		m.ObserveRefit(1, err)
		m.ObserveQuery(0.003, verdict)
		m.ObserveDeletion(true)
		m.ObserveAudit(2)
	})
	if allocs != 0 {
		t.Errorf("updates allocate %v times per round, want 0", allocs)
	}
}

// BenchmarkMetricsObserveQuery reports the cost of one ObserveQuery (histogram plus
// labeled counter) as a ratio to one mutex-guarded increment timed in the same run,
// the floor for any consistent histogram update.
func BenchmarkMetricsObserveQuery(b *testing.B) {
	m := NewMetrics()
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
		m.ObserveQuery(0.002, "certified")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x_mutex_incr")
	promSink = x
}

var promSink uint64

// BenchmarkMetricsWriteTo reports one scrape's cost as a ratio to copying the same
// number of bytes, timed in the same run.
func BenchmarkMetricsWriteTo(b *testing.B) {
	m := NewMetrics()
	for p := range 12 {
		m.SetLag("cairn.train", p, int64(p))
		m.AddEvents("cairn.train", "applied", p)
	}
	var buf bytes.Buffer
	m.WriteTo(&buf)
	src := bytes.Clone(buf.Bytes())
	dst := make([]byte, len(src))
	const baseN = 1 << 12
	t0 := time.Now()
	for range baseN {
		copy(dst, src)
	}
	base := float64(time.Since(t0).Nanoseconds()) / baseN
	for b.Loop() {
		buf.Reset()
		m.WriteTo(&buf)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x_memcopy")
	promSink = uint64(dst[0])
}
