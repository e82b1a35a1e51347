package lint

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLayers: internal's layers hold (package internal's doc). A package under
// internal/base imports no other cairn package but base's own; nothing outside the
// laboratory and the commands imports internal/lab. Test files are exempt: a test may
// use the laboratory's harnesses.
func TestLayers(t *testing.T) {
	const mod = "github.com/cairnhq/cairn/"
	checked := 0
	for _, f := range trackedFiles(t) {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "third_party/") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		base := strings.HasPrefix(f, "internal/base/")
		lab := strings.HasPrefix(f, "internal/lab/") || strings.HasPrefix(f, "cmd/")
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, mod) {
				continue
			}
			rel := strings.TrimPrefix(p, mod)
			if base && !strings.HasPrefix(rel, "internal/base/") {
				t.Errorf("%s imports %s: the base layer imports only the base", f, rel)
			}
			if !lab && strings.HasPrefix(rel, "internal/lab/") {
				t.Errorf("%s imports %s: only the laboratory and the commands import internal/lab", f, rel)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d files; the repository holds more", checked)
	}
}

// TestLayerDocs: package internal's documentation names every package of the module in
// its layer's list (the public packages and the commands in its first paragraph, the
// others in the bullet of their layer: internal/base/..., internal/lab/..., a bullet of
// their own such as internal/lint, else the service's internal/...), and package base's
// bullets are exactly the base's packages. A package added without being listed fails.
func TestLayerDocs(t *testing.T) {
	internalDoc := packageDoc(t, "internal/doc.go")
	public, _, ok := strings.Cut(internalDoc, "Below them:")
	if !ok {
		t.Fatal(`internal/doc.go: no "Below them:" after the public packages`)
	}
	bullets := docBullets(internalDoc)
	baseNames := map[string]bool{}
	for _, b := range docBullets(packageDoc(t, "internal/base/doc.go")) {
		baseNames[b.head] = true
	}
	bullet := func(head string) string {
		for _, b := range bullets {
			if b.head == head {
				return b.text
			}
		}
		t.Fatalf("internal/doc.go: no bullet %q", head)
		return ""
	}
	var pkgs []string
	for dir := range goFiles(t) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		if rel = filepath.ToSlash(rel); rel != "." && rel != "internal" && rel != "internal/base" {
			pkgs = append(pkgs, rel)
		}
	}
	if len(pkgs) < 50 {
		t.Fatalf("found %d packages; the module holds more", len(pkgs))
	}
	own := map[string]bool{}
	for _, b := range bullets {
		own[b.head] = true
	}
	for _, p := range pkgs {
		var where, text, name string
		switch {
		case own[p]:
			continue // a bullet of its own
		case strings.HasPrefix(p, "internal/base/"):
			name = strings.TrimPrefix(p, "internal/base/")
			if !baseNames[name] {
				t.Errorf("%s: internal/base/doc.go has no bullet %q", p, name)
			}
			delete(baseNames, name)
			where, text = "the internal/base/... bullet", bullet("internal/base/...")
		case strings.HasPrefix(p, "internal/lab/"):
			name = strings.TrimPrefix(p, "internal/lab/")
			where, text = "the internal/lab/... bullet", bullet("internal/lab/...")
		case strings.HasPrefix(p, "internal/"):
			name = strings.TrimPrefix(p, "internal/")
			where, text = "the internal/... bullet", bullet("internal/...")
		default:
			name, where, text = p, "the public packages' paragraph", public
		}
		if !namesPackage(text, name) {
			t.Errorf("%s: internal/doc.go does not name %q in %s", p, name, where)
		}
	}
	for name := range baseNames {
		t.Errorf("internal/base/doc.go lists %q, which is no package of internal/base", name)
	}
}

// packageDoc is the package documentation of the Go file f (relative to the root).
func packageDoc(t *testing.T, f string) string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if file.Doc == nil {
		t.Fatalf("%s: no package documentation", f)
	}
	return file.Doc.Text()
}

// docBullet is one bullet of a doc comment's list: its head (the text before the first
// colon) and its whole text.
type docBullet struct{ head, text string }

// docBullets returns the bullets ("  - head: text", continued on indented lines) of a
// doc comment's text.
func docBullets(doc string) []docBullet {
	var out []docBullet
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "- "):
			item := strings.TrimPrefix(strings.TrimSpace(line), "- ")
			head, _, _ := strings.Cut(item, ":")
			out, in = append(out, docBullet{head: head, text: item}), true
		case in && strings.HasPrefix(line, " "):
			out[len(out)-1].text += "\n" + strings.TrimSpace(line)
		default:
			in = false
		}
	}
	return out
}

// namesPackage reports whether text names the package path name as a word of its own
// ("serving/gradref" names serving/gradref, not serving).
func namesPackage(text, name string) bool {
	return regexp.MustCompile(`(^|[^\w/])` + regexp.QuoteMeta(name) + `($|[^\w/])`).MatchString(text)
}
