package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Source is what the pages read. The daemon implements it; every method is called on
// the HTTP server's goroutines, concurrently, and must be safe for that.
type Source interface {
	// Overview is the daemon's summary and its recent time series.
	Overview() Overview
	// Answer is a recent answer by request id (false: not answered, or no longer kept).
	Answer(request string) (Answer, bool)
	// Point is a stored training point's input; false when it is not stored (deleted,
	// or never stored). It is asked at every rendering, so a deleted point is never
	// shown, whatever the page or the answer that named it.
	Point(id string) ([]float64, bool)
	// Audits are the deletion audits of the audit chain, oldest first, with the chain's
	// and the signature's status.
	Audits() ([]Audit, error)
}

// Overview is the overview page's data.
type Overview struct {
	Role             string
	Leading, Ready   bool
	Model            uint64
	ModelID          string
	ModelPoints      int
	Points           int
	Landmarks        int
	Masked           int
	PendingDeletions int
	Refits           uint64
	Queries          uint64
	Samples          []Sample
	Recent           []AnswerRef // most recent first
	// Labels are the stored points and the pool's landmarks per label, by label
	// (empty without labels): a class the pool leaves out shows as coverage 0.
	Labels []LabelRow
	// Backbone names the served network (its architecture spec, or "onnx:<SHA-256>"
	// with the file), and Coverage says how much of it the kernel differentiates.
	Backbone string
	Coverage BackboneCoverage
}

// BackboneCoverage is the share of the backbone's parameters in the kernel (Share =
// KernelParams/ModelParams) and the loader's warnings about the export, one line each.
type BackboneCoverage struct {
	KernelParams, ModelParams int
	Share                     float64
	Warnings                  []string
}

// LabelRow is one label's points and landmarks; Coverage is the label's share of the
// landmarks over its share of the stored points (1: represented in proportion).
type LabelRow struct {
	Label             string
	Points, Landmarks int
	Coverage          float64
}

// AnswerRef names a recent answer.
type AnswerRef struct {
	Request string
	At      time.Time
	Model   uint64
	Verdict string
}

// Scored is one ranked landmark or stored point of an answer; View is "" for a
// stored point (a ranking over every labelled stored point); Cosine is 0 on an answer
// without exact rows (stream.Scored).
type Scored struct {
	ID, View              string
	Score, Radius, Cosine float64
}

// Answer is one answered query: the attribution as emitted, and what the page needs to
// show the query (its input, or the id of the stored point it named).
type Answer struct {
	Request       string
	At            time.Time
	Model         uint64
	ModelID       string
	Verdict       string
	K             int
	Lower, Upper  float64 // min(Î−ε) over the top-K, max(Î+ε) below the cut
	Separation    float64
	VarianceModel string
	Delta         float64
	Floor         string // the fit floor in words ("" without repeated fits)
	// Ranking is the answer's "score" (certify.Ranking); AllPoints says whether it ranks
	// every labelled stored point rather than the landmarks.
	Ranking   string
	AllPoints bool
	// Stable and Stability are the answer's (the expected top-K Jaccard under a refit
	// with another seed; nil: not known); Explained is 1 − its residual fraction, the
	// share of the query the landmarks explain (nil: not reported).
	Stable    bool
	Stability *float64
	Explained *float64
	QueryID   string
	QueryX    []float64
	Top       []Scored
	RunnerUp  *Scored
	LatencyMS float64
}

// Audit is one record of the audit chain.
type Audit struct {
	Seq                  uint64
	Hash, PrevHash       string
	ChainOK              bool
	KeyID                string
	SignatureOK          bool
	Request, ID          string
	Known, WasLandmark   bool
	ModelBefore          uint64
	ModelAfter           uint64
	Percentile, PValue   float64
	Requested, RefitDone time.Time
}

// Handler serves the read-only UI under /ui: the overview (/ui), an answer
// (/ui/answer/REQ, or /ui/answer?request=REQ from the form), the audits (/ui/audits),
// the inputs as PNG (/ui/img/query/REQ, /ui/img/point/ID) and the stylesheet
// (/ui/static/style.css). Assets are embedded; nothing is fetched from elsewhere, and
// every response carries a content security policy that allows only this origin's
// images and stylesheet (pages have no scripts at all).
type Handler struct {
	src   Source
	shape Shape
	log   zerolog.Logger
	mux   *http.ServeMux
	pages *template.Template
	css   []byte
	icon  []byte
}

// static serves an embedded asset.
func static(contentType string, b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(b)
	}
}

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every UI response.
const CSP = "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// parsePages parses the embedded templates and reads the stylesheet and the icon.
func parsePages() (*template.Template, []byte, []byte) {
	funcs := template.FuncMap{
		"fmt":   formatValue,
		"pct":   func(v float64) string { return formatValue(100*v) + "%" },
		"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"short": func(s string) string { return s[:min(len(s), 16)] },
		"path":  pathEscape,
	}
	t := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html"))
	css, err1 := fs.ReadFile(assets, "assets/style.css")
	icon, err2 := fs.ReadFile(assets, "assets/favicon.svg")
	if err := errors.Join(err1, err2); err != nil {
		panic(err) // embedded at build time
	}
	return t, css, icon
}

// New builds the handler for inputs of shape (the zero Shape: tabular).
func New(src Source, shape Shape, log zerolog.Logger) *Handler {
	t, css, icon := parsePages()
	h := &Handler{src: src, shape: shape, log: log, mux: http.NewServeMux(), pages: t, css: css, icon: icon}
	h.mux.HandleFunc("GET /ui", h.overview)
	h.mux.HandleFunc("GET /ui/{$}", h.overview)
	h.mux.HandleFunc("GET /ui/answer", h.answerForm)
	h.mux.HandleFunc("GET /ui/answer/{req...}", h.answer)
	h.mux.HandleFunc("GET /ui/audits", h.audits)
	h.mux.HandleFunc("GET /ui/erasure/{req...}", h.erasure)
	h.mux.HandleFunc("GET /ui/img/query/{req...}", h.queryImage)
	h.mux.HandleFunc("GET /ui/img/point/{id...}", h.pointImage)
	h.mux.HandleFunc("GET /ui/static/style.css", static("text/css; charset=utf-8", h.css))
	h.mux.HandleFunc("GET /ui/static/favicon.svg", static("image/svg+xml", h.icon))
	return h
}

// ServeHTTP sets the security headers and routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// pathEscape escapes an id or request for the end of a path (the routes take the rest
// of the path, slashes included, as the id).
func pathEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func (h *Handler) render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := h.pages.ExecuteTemplate(&b, name, data); err != nil {
		h.log.Error().Err(err).Str("page", name).Msg("ui page does not render")
		http.Error(w, "the page does not render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, b.String())
}

// overviewPage is the overview template's data.
type overviewPage struct {
	Overview
	Charts []chart
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	o := h.src.Overview()
	h.render(w, "overview.html", overviewPage{Overview: o, Charts: charts(o.Samples)})
}

func (h *Handler) answerForm(w http.ResponseWriter, r *http.Request) {
	req := r.URL.Query().Get("request")
	if req == "" {
		http.Redirect(w, r, "/ui", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/answer/"+pathEscape(req), http.StatusSeeOther)
}

// landmarkView is one ranked landmark or stored point on the answer page; ShowCosine
// is false where the score is the cosine itself (gradient_cosine).
type landmarkView struct {
	Rank int
	Scored
	Deleted    bool
	ShowCosine bool
	Input      *inputView
}

// inputView is an input to show: a picture (Image, at ImageURL) or a feature table.
type inputView struct {
	ImageURL string
	Features []feature
}

type feature struct {
	Index int
	Value string
}

// answerPage is the answer template's data.
type answerPage struct {
	Answer
	Query     *inputView
	QueryGone bool
	Landmarks []landmarkView
	Next      *landmarkView
	Chart     template.HTML
	Certified bool
}

// input makes the view of x: the image URL for images, else the feature table.
func (h *Handler) input(x []float64, url string) *inputView {
	if h.shape.Image() {
		return &inputView{ImageURL: url}
	}
	v := &inputView{}
	for i, f := range x {
		v.Features = append(v.Features, feature{Index: i, Value: formatValue(f)})
	}
	return v
}

func (h *Handler) answer(w http.ResponseWriter, r *http.Request) {
	req := r.PathValue("req")
	a, ok := h.src.Answer(req)
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		h.render(w, "missing.html", req)
		return
	}
	p := answerPage{Answer: a, Certified: a.Verdict == "certified"}
	if a.QueryID != "" {
		if x, ok := h.src.Point(a.QueryID); ok {
			p.Query = h.input(x, "/ui/img/point/"+pathEscape(a.QueryID))
		} else {
			p.QueryGone = true
		}
	} else if a.QueryX != nil {
		p.Query = h.input(a.QueryX, "/ui/img/query/"+pathEscape(req))
	}
	view := func(rank int, s Scored) landmarkView {
		v := landmarkView{Rank: rank, Scored: s, ShowCosine: s.Cosine != 0 && s.Cosine != s.Score}
		if x, ok := h.src.Point(s.ID); ok {
			v.Input = h.input(x, "/ui/img/point/"+pathEscape(s.ID))
		} else {
			v.Deleted, v.Scored.ID = true, "" // never shown, not even by name
		}
		return v
	}
	var bars []bar
	for i, s := range a.Top {
		v := view(i+1, s)
		p.Landmarks = append(p.Landmarks, v)
		bars = append(bars, bar{Label: barLabel(v), Score: s.Score, Radius: s.Radius, Top: true})
	}
	if a.RunnerUp != nil && a.RunnerUp.ID != "" {
		v := view(len(a.Top)+1, *a.RunnerUp)
		p.Next = &v
		bars = append(bars, bar{Label: barLabel(v), Score: v.Score, Radius: v.Radius})
	}
	p.Chart = barChart(bars, a.Lower, a.Upper)
	h.render(w, "answer.html", p)
}

func barLabel(v landmarkView) string {
	if v.Deleted {
		return fmt.Sprintf("#%d deleted point", v.Rank)
	}
	id := v.ID
	if len(id) > 20 {
		id = "…" + id[len(id)-19:]
	}
	if v.View == "" {
		return fmt.Sprintf("#%d %s", v.Rank, id)
	}
	return fmt.Sprintf("#%d %s (%s)", v.Rank, id, v.View)
}

func (h *Handler) audits(w http.ResponseWriter, r *http.Request) {
	as, err := h.src.Audits()
	if err != nil {
		h.log.Error().Err(err).Msg("ui: audits")
		http.Error(w, "the audit chain cannot be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	ok := true
	for _, a := range as {
		ok = ok && a.ChainOK && a.SignatureOK
	}
	h.render(w, "audits.html", struct {
		Audits []Audit
		AllOK  bool
	}{as, ok})
}

// errNoImage is a request for a picture the UI does not have (tabular data, an unknown
// answer, a point not stored).
var errNoImage = errors.New("no such image")

func (h *Handler) servePNG(w http.ResponseWriter, x []float64, ok bool) {
	if !ok || !h.shape.Image() {
		http.Error(w, errNoImage.Error(), http.StatusNotFound)
		return
	}
	b, err := encodePNG(x, h.shape)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(b)
}

func (h *Handler) queryImage(w http.ResponseWriter, r *http.Request) {
	a, ok := h.src.Answer(r.PathValue("req"))
	h.servePNG(w, a.QueryX, ok && a.QueryX != nil)
}

func (h *Handler) pointImage(w http.ResponseWriter, r *http.Request) {
	x, ok := h.src.Point(r.PathValue("id"))
	h.servePNG(w, x, ok)
}
