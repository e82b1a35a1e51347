package ui

import (
	"bytes"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fake is a Source with fixed data: points p1, p2 stored, "zz-erased" deleted.
type fake struct {
	answers map[string]Answer
	points  map[string][]float64
}

func (f fake) Overview() Overview {
	return Overview{Role: "primary", Ready: true, Model: 3, Points: 2, Samples: []Sample{
		{At: time.Unix(100, 0), Values: [metricCount]float64{math.NaN(), 1, 2, 3, 4, 5, 6, 7, math.NaN(), math.NaN(), math.NaN()}},
		{At: time.Unix(105, 0), Values: [metricCount]float64{10, 2, 2, 3, 4, 5, 6, 7, 1, 2, 3}},
	}}
}
func (f fake) Answer(r string) (Answer, bool) { a, ok := f.answers[r]; return a, ok }
func (f fake) Point(id string) ([]float64, bool) {
	x, ok := f.points[id]
	return x, ok
}
func (f fake) Audits() ([]Audit, error) {
	return []Audit{{Seq: 1, ChainOK: true, SignatureOK: true, Request: "del-1", ID: "zz-erased", Known: true}}, nil
}

func newFake() fake {
	x := make([]float64, 4)
	for i := range x {
		x[i] = float64(i)
	}
	a := Answer{Request: "r/1", Model: 3, Verdict: "certified", K: 2, Lower: 0.5, Upper: 0.4, QueryX: x,
		Top:      []Scored{{ID: "zz-erased", View: "A", Score: 0.9, Radius: 0.1}, {ID: "p1", View: "B", Score: 0.7, Radius: 0.1, Cosine: 0.42}},
		RunnerUp: &Scored{ID: "p2", View: "A", Score: 0.3, Radius: 0.1}}
	byID := Answer{Request: "r2", Verdict: "uncertified", K: 1, QueryID: "zz-erased", Top: []Scored{{ID: "p1", View: "A", Score: 1}}}
	one, explained := 1.0, 0.25
	points := Answer{Request: "r3", Model: 3, Verdict: "certified", K: 2, Lower: 0.5, Upper: 0.4, QueryX: x,
		Ranking: "gradient_cosine", AllPoints: true, Stable: true, Stability: &one, Explained: &explained,
		Top:      []Scored{{ID: "p1", Score: 0.9, Radius: 1e-8, Cosine: 0.9}, {ID: "zz-erased", Score: 0.7, Radius: 1e-8, Cosine: 0.7}},
		RunnerUp: &Scored{ID: "p2", Score: 0.3, Radius: 1e-8, Cosine: 0.3}}
	return fake{answers: map[string]Answer{"r/1": a, "r2": byID, "r3": points}, points: map[string][]float64{"p1": x, "p2": x}}
}

func serve(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestPages: every route answers with the security headers; the answer page shows the
// stored landmarks and the runner-up, with a cosine where the answer has one, but never
// the deleted one (neither its id nor its picture), a query by the id of a deleted point
// is not shown, tabular inputs become a feature table, unknown answers and pictures are
// 404, and only GET/HEAD are served.
func TestPages(t *testing.T) {
	f := newFake()
	for _, shape := range []Shape{{C: 1, H: 2, W: 2}, {}} {
		h := New(f, shape, zerolog.Nop())
		for _, p := range []string{"/ui", "/ui/", "/ui/answer/r/1", "/ui/answer/r2", "/ui/audits", "/ui/static/style.css", "/ui/static/favicon.svg"} {
			res, body := serve(t, h, "GET", p)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%v GET %s: %d %s", shape, p, res.StatusCode, body)
			}
			if res.Header.Get("Content-Security-Policy") != CSP || res.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("GET %s: headers %v", p, res.Header)
			}
		}
		_, page := serve(t, h, "GET", "/ui/answer/r/1")
		if strings.Contains(page, "zz-erased") {
			t.Errorf("%v: the answer page names the deleted point", shape)
		}
		for _, want := range []string{"deleted point", "p1", "p2", "Best below the cut", "certified", `class="bars"`} {
			if !strings.Contains(page, want) {
				t.Errorf("%v: the answer page lacks %q", shape, want)
			}
		}
		if !strings.Contains(page, ">cosine 0.42<") || strings.Count(page, ">cosine ") != 1 {
			t.Errorf("%v: the answer page shows the cosine of p1 (0.42) %d times, want once and none for p2 (no cosine)",
				shape, strings.Count(page, ">cosine 0.42<"))
		}
		if shape.Image() != strings.Contains(page, "/ui/img/point/p1") {
			t.Errorf("%v: picture link present %v", shape, !shape.Image())
		}
		if !shape.Image() && !strings.Contains(page, `<table class="features">`) {
			t.Errorf("tabular answer page has no feature table")
		}
		_, pts := serve(t, h, "GET", "/ui/answer/r3")
		for _, want := range []string{"ranking <b>gradient_cosine</b> over every labelled stored point", ">stable<",
			"Jaccard under a reseed 1", "explain 25%", "Top-2 stored points", "#1 p1<", "#3 p2<", "Best below the cut", "score 0.9 ±"} {
			if !strings.Contains(pts, want) {
				t.Errorf("%v: the stored-point answer page lacks %q", shape, want)
			}
		}
		for _, bad := range []string{"zz-erased", "()", " view ", "landmarks</h2>", ">cosine "} {
			if strings.Contains(pts, bad) {
				t.Errorf("%v: the stored-point answer page shows %q (a deleted id, an empty view, a landmark heading, or a cosine equal to the score)", shape, bad)
			}
		}
		_, byID := serve(t, h, "GET", "/ui/answer/r2")
		if strings.Contains(byID, "zz-erased") || !strings.Contains(byID, "no longer stored") {
			t.Errorf("%v: a query by a deleted id: %s", shape, byID)
		}
		for _, p := range []string{"/ui/answer/none", "/ui/img/point/zz-erased", "/ui/img/query/none", "/ui/img/query/r2", "/ui/nothing"} {
			if res, _ := serve(t, h, "GET", p); res.StatusCode != http.StatusNotFound {
				t.Errorf("%v GET %s: %d, want 404", shape, p, res.StatusCode)
			}
		}
		if res, _ := serve(t, h, "POST", "/ui"); res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /ui: %d, want 405", res.StatusCode)
		}
		if res, _ := serve(t, h, "GET", "/ui/answer?request=r%2F1"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/answer/r/1" {
			t.Errorf("the form: %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
	}
	h := New(f, Shape{C: 1, H: 2, W: 2}, zerolog.Nop())
	res, body := serve(t, h, "GET", "/ui/img/point/p1")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("picture: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	img, err := png.Decode(bytes.NewReader([]byte(body)))
	if err != nil || img.Bounds().Dx() != 2 || img.Bounds().Dy() != 2 {
		t.Fatalf("picture decodes to %v (%v)", img, err)
	}
}

// TestEncodePNG: a gray image is scaled from its minimum (0) to its maximum (255),
// row-major; an RGB image per channel; wrong lengths are errors.
func TestEncodePNG(t *testing.T) {
	b, err := encodePNG([]float64{-1, 0, 1, 3}, Shape{C: 1, H: 2, W: 2})
	if err != nil {
		t.Fatal(err)
	}
	img, _ := png.Decode(bytes.NewReader(b))
	want := []uint8{0, 64, 128, 255}
	for i, w := range want {
		r, _, _, _ := img.At(i%2, i/2).RGBA()
		if uint8(r>>8) != w {
			t.Errorf("pixel %d: %d, want %d", i, r>>8, w)
		}
	}
	b, err = encodePNG([]float64{0, 1, 5, 5, 2, 0}, Shape{C: 3, H: 1, W: 2})
	if err != nil {
		t.Fatal(err)
	}
	img, _ = png.Decode(bytes.NewReader(b))
	if r, g, bl, _ := img.At(1, 0).RGBA(); r>>8 != 255 || g>>8 != 0 || bl>>8 != 0 {
		t.Errorf("RGB pixel (1,0) = %d %d %d, want 255 0 0 (red max, green flat, blue min)", r>>8, g>>8, bl>>8)
	}
	if _, err := encodePNG(make([]float64, 3), Shape{C: 1, H: 2, W: 2}); err == nil {
		t.Error("a short input encoded")
	}
}

// TestRecorder: the answer log keeps the most recent answers up to its capacity (an
// answer repeated moves to the front instead of taking a second slot); a sample has the
// event rate over the interval, the certified share and nearest-rank latency quantiles
// of the interval's answers (NaN without answers); the series ring keeps the newest
// slots samples in order.
func TestRecorder(t *testing.T) {
	r := NewRecorder(3, 2)
	for i, req := range []string{"a", "b", "c", "a", "d"} {
		r.Answered(Answer{Request: req, Verdict: map[bool]string{true: "certified", false: "uncertified"}[i%2 == 0], LatencyMS: float64(i + 1)})
	}
	if _, ok := r.Answer("b"); ok {
		t.Error("b kept beyond the capacity")
	}
	var got []string
	for _, a := range r.Recent(10) {
		got = append(got, a.Request)
	}
	if strings.Join(got, ",") != "d,a,c" {
		t.Errorf("recent %v, want d,a,c", got)
	}
	t0 := time.Unix(1000, 0)
	r.Record(Reading{At: t0, Events: 100})
	s := r.Samples()
	if len(s) != 1 || !math.IsNaN(s[0].Values[0]) || s[0].Values[8] != 3.0/5 || s[0].Values[9] != 3 || s[0].Values[10] != 5 {
		t.Fatalf("first sample %+v: want rate NaN, certified 3/5, p50 3, p99 5", s[0].Values)
	}
	r.Record(Reading{At: t0.Add(4 * time.Second), Events: 300})
	s = r.Samples()
	if v := s[1].Values; v[0] != 50 || !math.IsNaN(v[8]) || !math.IsNaN(v[9]) {
		t.Errorf("second sample %v: want rate 50/s and no answers", v)
	}
	r.Record(Reading{At: t0.Add(8 * time.Second), Events: 300})
	if s = r.Samples(); len(s) != 2 || !s[0].At.Equal(t0.Add(4*time.Second)) || s[1].Values[0] != 0 {
		t.Errorf("ring of 2 after 3 samples: %v", s)
	}
}

// TestLineChart: a NaN splits a line, an isolated value becomes a dot, and a chart
// without data says so.
func TestLineChart(t *testing.T) {
	mk := func(vs ...float64) []Sample {
		var out []Sample
		for i, v := range vs {
			s := Sample{At: time.Unix(int64(i), 0)}
			s.Values[0] = v
			out = append(out, s)
		}
		return out
	}
	svg := string(lineChart(mk(1, 2, math.NaN(), 3, 4, math.NaN(), 5), []int{0}))
	if n := strings.Count(svg, "<polyline"); n != 2 || strings.Count(svg, "<circle") != 1 {
		t.Errorf("two segments and a dot expected:\n%s", svg)
	}
	if !strings.Contains(string(lineChart(nil, []int{0})), "no data yet") {
		t.Error("an empty chart does not say so")
	}
}
