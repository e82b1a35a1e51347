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

// headingsOf returns the headings of a Markdown file, as written.
func headingsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(b), -1) {
		out[strings.TrimSpace(m[1])] = true
	}
	return out
}

// anchorsOf returns the GitHub-style anchors of a Markdown file's headings.
func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for h := range headingsOf(t, path) {
		out[strings.ReplaceAll(mdDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
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

// docRef matches a reference from code to a manual page, docs/NAME.md, with the
// headings it cites after it: `docs/architecture.md, "Events" and "State and storage"`
// or `docs/architecture.md ("Refits")`.
var (
	docRef     = regexp.MustCompile(`docs/([A-Za-z0-9_/-]+\.md)((?:(?:, | \(| and | )"[^"]+"\)?)*)`)
	docHeading = regexp.MustCompile(`"([^"]+)"`)
	generated  = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
	commentEOL = regexp.MustCompile(`\n\s*//\s*`)
)

// TestCodeDocRefs: every manual page a Go file cites (docs/NAME.md) exists, and every
// heading it cites right after the page's name is one of that page's headings, so a
// comment that sends a reader to the manual does not send them nowhere.
func TestCodeDocRefs(t *testing.T) {
	checked := 0
	for _, f := range trackedFiles(t) {
		if !strings.HasSuffix(f, ".go") || strings.HasPrefix(f, "third_party/") || f == "internal/lint/links_test.go" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if generated.Match(b) {
			continue // another project's documents, cited by its generated code
		}
		// A comment's line breaks and "//" do not end a reference.
		text := commentEOL.ReplaceAllString(string(b), " ")
		for _, m := range docRef.FindAllStringSubmatch(text, -1) {
			page := filepath.Join(root, "docs", m[1])
			checked++
			if _, err := os.Stat(page); err != nil {
				t.Errorf("%s: cites docs/%s: %v", f, m[1], err)
				continue
			}
			headings := headingsOf(t, page)
			for _, h := range docHeading.FindAllStringSubmatch(m[2], -1) {
				if !headings[h[1]] {
					t.Errorf("%s: cites docs/%s, %q: no such heading", f, m[1], h[1])
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d references to docs/ in Go files; the code holds more", checked)
	}
}
