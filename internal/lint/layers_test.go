package lint

import (
	"go/parser"
	"go/token"
	"path/filepath"
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
