package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches a Markdown inline link's target; mdHeading a heading line.
var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#+\s+(.*)$`)
	mdDrop    = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// anchorsOf returns the GitHub-style anchors of a Markdown file's headings.
func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(b), -1) {
		a := strings.ToLower(strings.TrimSpace(m[1]))
		out[strings.ReplaceAll(mdDrop.ReplaceAllString(a, ""), " ", "-")] = true
	}
	return out
}

// TestDocLinks: every relative link in the repository's Markdown (the README and
// docs/ included) names a file of the repository, and a link to a heading of a
// Markdown file names one it has; a reader of a clone never meets a dead link.
func TestDocLinks(t *testing.T) {
	checked := 0
	for _, f := range trackedFiles(t) {
		if !strings.HasSuffix(f, ".md") || strings.HasPrefix(f, "third_party/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(link, "#")
			target := filepath.Join(root, f)
			if path != "" {
				target = filepath.Join(root, filepath.Dir(f), path)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %q: %v", f, link, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(t, target)[anchor] {
				t.Errorf("%s: link %q: no heading with that anchor", f, link)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links; the README and docs/ hold more", checked)
	}
}
