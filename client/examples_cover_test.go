package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestEveryFunctionHasExample: every exported function and method of the package has
// a runnable example (Example<Func>, Example<Type>_<Method>, with an Output comment so
// that go test runs it), but the error type's Error and Is, which errors.As and
// errors.Is call and ExampleDeadLetterError shows.
func TestEveryFunctionHasExample(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	want, have := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(e.Name(), "_test.go")
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			switch {
			case !ok:
			case test:
				if strings.HasPrefix(fn.Name.Name, "Example") && hasOutput(f, fn) {
					have[strings.TrimPrefix(fn.Name.Name, "Example")] = true
				}
			case fn.Name.IsExported():
				if name := exampleName(fn); name != "" {
					want[name] = true
				}
			}
		}
	}
	if len(want) < 20 {
		t.Fatalf("found %d exported functions; is this the client package's directory?", len(want))
	}
	for w := range want {
		if !have[w] {
			t.Errorf("no runnable example for %s (func Example%s with an // Output: comment)", strings.Replace(w, "_", ".", 1), w)
		}
	}
}

// exampleName is the suffix of the example an exported function or method needs
// (Func, Type_Method), or "" for the error type's Error and Is.
func exampleName(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if s, ok := recv.(*ast.StarExpr); ok {
		recv = s.X
	}
	typ := recv.(*ast.Ident).Name
	if typ == "DeadLetterError" && (fn.Name.Name == "Error" || fn.Name.Name == "Is") {
		return ""
	}
	return typ + "_" + fn.Name.Name
}

// hasOutput reports whether fn's body holds an "Output:" comment, which makes go test
// run the example and compare what it prints.
func hasOutput(f *ast.File, fn *ast.FuncDecl) bool {
	for _, g := range f.Comments {
		if g.Pos() < fn.Body.Lbrace || g.End() > fn.Body.Rbrace {
			continue
		}
		for _, c := range g.List {
			if t := strings.TrimSpace(strings.TrimPrefix(c.Text, "//")); strings.HasPrefix(t, "Output:") || strings.HasPrefix(t, "Unordered output:") {
				return true
			}
		}
	}
	return false
}
