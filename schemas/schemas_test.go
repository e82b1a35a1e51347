package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/schemas"
)

// openLineage is the official OpenLineage 2-0-2 schema that lineage.v1.json refers to,
// committed (with its license note) as package lineage's test data.
const openLineage = "../internal/lineage/testdata/OpenLineage.json"

// testDim is the input size of the decoder tests' deployment.
const testDim = 3

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

// compileAll compiles every schema once, with formats asserted, resolving references
// among the embedded schemas and to the committed OpenLineage schema only: the
// compiler has no loader for https, so nothing is fetched.
func compileAll(tb testing.TB) map[string]*jsonschema.Schema {
	tb.Helper()
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		add := func(uri string, b []byte) error {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				return err
			}
			return c.AddResource(uri, doc)
		}
		for _, n := range schemas.Names() {
			b, _ := schemas.Get(n)
			if compileErr = add(schemas.URI(n), b); compileErr != nil {
				return
			}
		}
		ol, err := os.ReadFile(openLineage)
		if err != nil {
			compileErr = err
			return
		}
		if compileErr = add("https://openlineage.io/spec/2-0-2/OpenLineage.json", ol); compileErr != nil {
			return
		}
		// The input size is the deployment's (kafka.input_dim), which the schemas cannot
		// know: the decoder tests bind it with an overlay, as a deployment would.
		all := schemas.Names()
		for _, n := range []string{"train", "query"} {
			uri := "https://cairn.test/" + n + "-dim.json"
			overlay := fmt.Sprintf(`{"$schema": "https://json-schema.org/draft/2020-12/schema",
				"allOf": [{"$ref": %q}], "properties": {"x": {"minItems": %d, "maxItems": %d}}}`, schemas.URI(n), testDim, testDim)
			if compileErr = add(uri, []byte(overlay)); compileErr != nil {
				return
			}
			all = append(all, n+"-dim")
		}
		compiled = map[string]*jsonschema.Schema{}
		for _, n := range all {
			uri := schemas.URI(n)
			if strings.HasSuffix(n, "-dim") {
				uri = "https://cairn.test/" + n + ".json"
			}
			s, err := c.Compile(uri)
			if err != nil {
				compileErr = err
				return
			}
			compiled[n] = s
		}
	})
	if compileErr != nil {
		tb.Fatal(compileErr)
	}
	return compiled
}

// validate checks raw, one JSON text, against the schema called name: nil when a
// consumer that parses JSON with encoding/json and validates would accept it.
func validate(tb testing.TB, name string, raw []byte) error {
	tb.Helper()
	s, ok := compileAll(tb)[name]
	if !ok {
		tb.Fatalf("no schema %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// mustValid fails the test unless raw is valid under name.
func mustValid(t *testing.T, name, what string, raw []byte) {
	t.Helper()
	if err := validate(t, name, raw); err != nil {
		t.Errorf("%s: %s is not valid under %s: %v", what, raw, name, err)
	}
}

// TestEmbedded: every schema is a draft 2020-12 document whose $id is URI(name), with a
// title and a description, and all of them compile; Get copies, and the names a
// reader expects are there.
func TestEmbedded(t *testing.T) {
	compileAll(t)
	want := []string{"attribution", "audit", "common", "deadletter", "erasure", "lineage", "query", "status", "train", "train-delete", "train-upsert"}
	if got := schemas.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, n := range schemas.Names() {
		b, ok := schemas.Get(n)
		if !ok {
			t.Fatalf("Get(%q): not found", n)
		}
		var doc struct {
			Schema      string `json:"$schema"`
			ID          string `json:"$id"`
			Title       string `json:"title"`
			Description string `json:"description"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if doc.ID != schemas.URI(n) || doc.ID != "https://cairn.dev/schemas/"+n+".v1.json" {
			t.Errorf("%s: $id %q, want %q", n, doc.ID, schemas.URI(n))
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q", n, doc.Schema)
		}
		if doc.Title == "" || doc.Description == "" {
			t.Errorf("%s: no title or description", n)
		}
		b[0] = 'X'
		if again, _ := schemas.Get(n); again[0] == 'X' {
			t.Errorf("%s: Get returned the embedded bytes, not a copy", n)
		}
	}
	if _, ok := schemas.Get("nope"); ok {
		t.Error(`Get("nope") found a schema`)
	}
	if _, ok := schemas.Get("../schemas.go"); ok {
		t.Error(`Get("../schemas.go") found a schema`)
	}
}

// TestHandler: GET /schemas/{name} and /schemas/{name}.v1.json serve the embedded
// bytes as application/schema+json, /schemas/ lists the names with their $ids, HEAD has
// no body, an unknown name or another method is refused.
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(schemas.Handler())
	defer srv.Close()
	get := func(method, path string) (int, string, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	for _, n := range schemas.Names() {
		want, _ := schemas.Get(n)
		for _, p := range []string{"/schemas/" + n, "/schemas/" + n + schemas.Suffix} {
			code, ct, body := get("GET", p)
			if code != http.StatusOK || ct != schemas.ContentType || !bytes.Equal(body, want) {
				t.Errorf("GET %s: %d %q, %d bytes; want 200 %q, %d bytes", p, code, ct, len(body), schemas.ContentType, len(want))
			}
		}
	}
	code, ct, body := get("HEAD", "/schemas/audit")
	if code != http.StatusOK || ct != schemas.ContentType || len(body) != 0 {
		t.Errorf("HEAD /schemas/audit: %d %q, %d bytes", code, ct, len(body))
	}
	code, _, body = get("GET", "/schemas/")
	var idx []struct{ Name, ID string }
	if err := json.Unmarshal(bytes.ReplaceAll(body, []byte(`"$id"`), []byte(`"id"`)), &idx); code != http.StatusOK || err != nil || len(idx) != len(schemas.Names()) {
		t.Fatalf("GET /schemas/: %d %s (%v)", code, body, err)
	}
	for i, e := range idx {
		if e.Name != schemas.Names()[i] || e.ID != schemas.URI(e.Name) {
			t.Errorf("index entry %d: %+v", i, e)
		}
	}
	for _, c := range []struct{ method, path string }{{"GET", "/schemas/nope"}, {"GET", "/schemas/nope.v1.json"}, {"POST", "/schemas/audit"}, {"GET", "/schemas/audit/x"}} {
		if code, _, _ := get(c.method, c.path); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 404 or 405", c.method, c.path, code)
		}
	}
}

// TestOpenLineageCopy: the committed OpenLineage schema is the 2-0-2 spec (its $id).
func TestOpenLineageCopy(t *testing.T) {
	b, err := os.ReadFile(filepath.FromSlash(openLineage))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"$id": "https://openlineage.io/spec/2-0-2/OpenLineage.json"`) {
		t.Error("the committed OpenLineage schema is not spec 2-0-2")
	}
}
