package metrics

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboard: the dashboard in docs/grafana parses as a Grafana dashboard
// with Prometheus targets, and every metric its queries name is one this package
// registers or the Go and process collectors export (a renamed metric would leave an
// empty panel behind).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana/cairn.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard: %v (%d panels)", err, len(d.Panels))
	}
	w := httptest.NewRecorder()
	New().Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Result().Body)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exported[strings.Fields(name)[0]] = true
		}
	}
	// Vectors without a labelled child are not in a scrape yet; their names are in the
	// source that registers them.
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`"(cairn_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		exported[m[1]] = true
	}
	names := regexp.MustCompile(`\b(cairn|process|go)_[a-z_]+`)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				base := n
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suf)
				}
				if !exported[base] {
					t.Errorf("panel %q queries %s, which is not exported", p.Title, n)
				}
			}
		}
	}
}
