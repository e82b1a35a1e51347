package lint

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module root, two levels above this package.
const root = "../.."

// goFiles returns the non-test Go files of the module, by directory. third_party holds
// copies of other projects' code (their own modules), which keep their own habits.
func goFiles(t *testing.T) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" || d.Name() == "third_party") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found Go files in %d directories under %s; is the module root right?", len(dirs), root)
	}
	return dirs
}

// TestSynopses: every package's go doc synopsis is a whole sentence: its parentheses
// balance and it does not end at an abbreviation, where go doc cuts "(paper Alg.
// cairn-stage2)" to "(paper Alg.".
func TestSynopses(t *testing.T) {
	abbrev := regexp.MustCompile(`\b(Alg|Prop|Thm|Cor|Lemma|eq|Eq|Fig|Sec|cf|e\.g|i\.e|resp|vs)\.$`)
	for dir, files := range goFiles(t) {
		fset := token.NewFileSet()
		var text string
		for _, p := range files {
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc != nil {
				text = f.Doc.Text()
			}
		}
		if text == "" {
			t.Errorf("%s: no package documentation", dir)
			continue
		}
		var p doc.Package
		syn := p.Synopsis(text)
		if strings.Count(syn, "(") != strings.Count(syn, ")") || abbrev.MatchString(syn) || !strings.HasSuffix(syn, ".") {
			t.Errorf("%s: go doc synopsis %q is not a whole sentence", dir, syn)
		}
	}
}

// TestNoIssueNumbers: code and comments say why, not which issue asked for it.
func TestNoIssueNumbers(t *testing.T) {
	re := regexp.MustCompile(`(?i)\bissue\s*#?\d+|#\d+\b`)
	for _, files := range goFiles(t) {
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if re.MatchString(line) {
					t.Errorf("%s:%d: %s", p, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestSentinelSpelling: a sentinel for non-finite numbers is spelled ErrNotFinite in
// every package.
func TestSentinelSpelling(t *testing.T) {
	for _, files := range goFiles(t) {
		fset := token.NewFileSet()
		for _, p := range files {
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.IsExported() && strings.HasPrefix(id.Name, "Err") &&
					strings.Contains(strings.ToLower(id.Name), "finite") && id.Name != "ErrNotFinite" {
					t.Errorf("%s: %s, want ErrNotFinite", fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}
}
