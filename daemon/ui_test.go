package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/dataset"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

var uiScreenshots = flag.String("ui-screenshots", "", "TestUI writes its browser screenshots (overview.png, answer.png, audits.png) into this directory")

// uiFixture is a daemon with a model on MNIST points (the default trained convnet, so
// inputs are images), two answered queries (by input and by stored id) and one deleted
// landmark that the answer by input named.
type uiFixture struct {
	r       *running
	base    string // http://addr
	deleted string // the deleted landmark's id
	kept    string // a landmark of the same answer that is still stored
}

func newUIFixture(t testing.TB) *uiFixture {
	t.Helper()
	const n = 240
	set, err := dataset.Open("mnist", "train", n)
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	test, err := dataset.Open("mnist", "test", 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t.TempDir())
	cfg.Model = config.Default().Model // the trained convnet shipped for MNIST: inputs are images
	cfg.UI.SampleInterval = 200 * time.Millisecond
	tp := cfg.Kafka.Topics
	r := startDaemon(t, cfg)
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	produceMsgs(t, r.d.Brokers(), upserts(t, tp.Train, set, rows))
	waitFor(t, "the first model on all points", 120*time.Second, func() bool {
		s := r.d.Status()
		return s.Model > 0 && s.ModelPoints == n && !s.RefitRunning
	})
	produceMsgs(t, r.d.Brokers(), []stream.Message{
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "ui-x", X: test.Row(0)}, set.D),
		queryMsg(t, tp.Queries, stream.QueryEvent{Request: "ui-id", ID: set.IDs[7], K: 5}, set.D),
	})
	var ans map[string]stream.Attribution
	waitFor(t, "two answers", 30*time.Second, func() bool {
		ans = keyed[stream.Attribution](t, r, tp.Attributions)
		return len(ans) == 2
	})
	f := &uiFixture{r: r, base: "http://" + r.d.HTTPAddr()}
	top := ans["ui-x"].TopK
	if len(top) < 2 {
		t.Fatalf("answer ui-x has %d landmarks", len(top))
	}
	f.deleted = top[0].ID
	for _, s := range top[1:] {
		if s.ID != f.deleted {
			f.kept = s.ID
			break
		}
	}
	produceMsgs(t, r.d.Brokers(), []stream.Message{deleteMsg(t, tp.Train, f.deleted, "ui-del")})
	waitFor(t, "the deletion's audit", 60*time.Second, func() bool {
		return len(keyed[stream.Audit](t, r, tp.Audits)) == 1
	})
	time.Sleep(3 * cfg.UI.SampleInterval) // a few samples after the deletion
	return f
}

// get fetches path and returns the status, the headers and the body.
func (f *uiFixture) get(t testing.TB, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(f.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestUI checks the pages over HTTP and then in headless Chromium: every page and
// image answers with the content security policy; the overview shows the series and
// the recent answers; the answer page shows the query picture, the top-K with scores,
// intervals and views, the verdict and the bar chart; the deleted landmark is never
// rendered (not its picture, not its id, and /ui/img/point/ID is 404) while a kept one
// is; the audits page shows the deletion with a verified chain and signature. In the
// browser each page renders with data and logs no console error; with -ui-screenshots
// DIR the screenshots are written there (the README's).
func TestUI(t *testing.T) {
	if testing.Short() {
		t.Skip("daemon UI test")
	}
	f := newUIFixture(t)
	for _, p := range []string{"/ui", "/ui/", "/ui/answer/ui-x", "/ui/answer/ui-id", "/ui/audits", "/ui/static/style.css",
		"/ui/img/query/ui-x", "/ui/img/point/" + f.kept} {
		code, h, body := f.get(t, p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		if h.Get("Content-Security-Policy") != ui.CSP || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: security headers %v", p, h)
		}
		if strings.Contains(body, "<script") {
			t.Errorf("GET %s: the page has a script", p)
		}
	}
	_, _, ov := f.get(t, "/ui")
	for _, want := range []string{"Residual certificate tr R", "Share of certified answers", "<polyline", "/ui/answer/ui-x", "Ingest rate"} {
		if !strings.Contains(ov, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	_, _, page := f.get(t, "/ui/answer/ui-x")
	for _, want := range []string{"/ui/img/query/ui-x", `class="bars"`, "/ui/img/point/" + f.kept, "deleted point", "score ", "ranking <b>gradient_cosine</b>", "stored points</h2>"} {
		if !strings.Contains(page, want) {
			t.Errorf("answer page lacks %q", want)
		}
	}
	if strings.Contains(page, f.deleted) {
		t.Errorf("the answer page names the deleted point %q", f.deleted)
	}
	if code, _, _ := f.get(t, "/ui/img/point/"+f.deleted); code != http.StatusNotFound {
		t.Errorf("the deleted point's picture: %d, want 404", code)
	}
	if code, _, _ := f.get(t, "/ui/answer/no-such-request"); code != http.StatusNotFound {
		t.Errorf("an unknown answer: %d, want 404", code)
	}
	_, _, au := f.get(t, "/ui/audits")
	if !strings.Contains(au, "ui-del") || !strings.Contains(au, "verified") || strings.Contains(au, "do not verify") {
		t.Errorf("audits page: %s", au)
	}
	if code, _, _ := f.get(t, "/ui/audits?x=1"); code != http.StatusOK {
		t.Errorf("audits with a query string: %d", code)
	}
	if resp, err := http.Post(f.base+"/ui", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui: %v %v, want 405", resp, err)
	}
	browse(t, f)
}

// chromium finds the browser; without it the browser half is skipped, except under CI
// (CI set), where .ci/run installs it and its absence is a failure.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH (.ci/run installs the Debian package chromium)")
	}
	t.Skip("no Chromium on PATH")
	return ""
}

// browse loads each page in headless Chromium, waits for its content, fails on any
// console message of type warning, error or exception (calls of the console API,
// uncaught exceptions and entries of the browser log, CSP violations included), and
// keeps a screenshot.
func browse(t *testing.T, f *uiFixture) {
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.DisableGPU)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	msgs := chromedp.Console(ctx) // subscribes now; ranged on its own goroutine
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleType("warning"), chromedp.ConsoleType("error"), chromedp.ConsoleException:
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s %s: %s (%s)", m.Type, m.Source, m.Text, m.URL))
				mu.Unlock()
			}
		}
	})
	defer wg.Wait()
	defer cancel() // ends the console subscription before wg.Wait
	for _, pg := range []struct{ name, path, wait string }{
		{"overview", "/ui", "svg.chart polyline"},
		{"answer", "/ui/answer/ui-x", "svg.bars rect.bar"},
		{"audits", "/ui/audits", "table.list td.ok"},
	} {
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate(f.base+pg.path), chromedp.WaitVisible(chromedp.CSS(pg.wait)))
		rendered := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", pg.name, err)
		}
		imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length`))
		if err != nil {
			t.Fatalf("%s: %v", pg.name, err)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", pg.name, err)
		}
		if pg.name == "answer" && imgs < 2 {
			t.Errorf("answer page: %d pictures loaded, want the query's and the kept landmarks'", imgs)
		}
		t.Logf("%s: rendered in %v, %d pictures, screenshot %d bytes", pg.name, rendered.Round(time.Millisecond), imgs, len(shot))
		if *uiScreenshots != "" {
			if err := os.WriteFile(filepath.Join(*uiScreenshots, pg.name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // let the last page's messages arrive
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(problems, "\n"))
	}
}

// BenchmarkUIPageVsQuery measures the server's cost of one page view (the handler's time
// to produce it, in process, without the network) against the cost of answering one
// query in process (Daemon.Answer: the certified top-10 on the same model, exact rows),
// measured in the same run; page/query is the ratio. The answer page's pictures are
// requests of their own, measured each (picture/query).
func BenchmarkUIPageVsQuery(b *testing.B) {
	f := newUIFixture(b)
	test, err := dataset.Open("mnist", "test", 1)
	if err != nil {
		b.Fatal(err)
	}
	h := f.r.d.uiHandler()
	view := func(path string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d", path, w.Code)
		}
	}
	timeOf := func(n int, f func()) time.Duration {
		start := time.Now()
		for range n {
			f()
		}
		return time.Since(start) / time.Duration(n)
	}
	q := stream.QueryEvent{Request: "bench", X: test.Row(0)}
	for b.Loop() {
		query := timeOf(50, func() {
			if _, err := f.r.d.Answer(q); err != nil {
				b.Fatal(err)
			}
		})
		answer := timeOf(50, func() { view("/ui/answer/ui-x") })
		overview := timeOf(50, func() { view("/ui") })
		audits := timeOf(50, func() { view("/ui/audits") })
		picture := timeOf(50, func() { view("/ui/img/point/" + f.kept) })
		b.ReportMetric(float64(query.Microseconds()), "query_µs")
		b.ReportMetric(float64(answer)/float64(query), "answer_page/query")
		b.ReportMetric(float64(overview)/float64(query), "overview/query")
		b.ReportMetric(float64(audits)/float64(query), "audits/query")
		b.ReportMetric(float64(picture)/float64(query), "picture/query")
	}
}
