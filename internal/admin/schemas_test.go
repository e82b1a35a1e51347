package admin

import (
	"encoding/json"
	"testing"

	"github.com/cairnhq/cairn/schemas"
)

// TestSchemasOpen: /schemas/ serves the events' JSON Schemas; as an open path it is
// open with everything below it (and /schemas, which the mux redirects there), while a path
// that only starts with its letters, or leaves it by "..", stays guarded.
func TestSchemasOpen(t *testing.T) {
	g := startGuarded(t, Security{TokenFile: writeToken(t, testToken, 0o600), OpenPaths: []string{"/healthz", "/schemas/"}})
	c := client(t, nil)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/schemas/", 200}, {"/schemas/audit", 200}, {"/schemas/audit.v1.json", 200}, {"/schemas/nope", 404},
		{"/schemas", 307}, {"/schemasx", 401}, {"/schemas/../status", 401}, {"/status", 401}, {"/healthz", 200},
	} {
		resp, body, err := g.do(t, c, "GET", tc.path, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d %.80q, want %d", tc.path, resp.StatusCode, body, tc.want)
		}
		if tc.path == "/schemas/audit" {
			var doc map[string]any
			if err := json.Unmarshal([]byte(body), &doc); err != nil || doc["$id"] != schemas.URI("audit") {
				t.Errorf("GET /schemas/audit: $id %v, %v; want %s", doc["$id"], err, schemas.URI("audit"))
			}
			if ct := resp.Header.Get("Content-Type"); ct != schemas.ContentType {
				t.Errorf("GET /schemas/audit: Content-Type %q, want %q", ct, schemas.ContentType)
			}
		}
	}
	// Not open: guarded like any other path.
	g2 := startGuarded(t, Security{TokenFile: writeToken(t, testToken, 0o600), OpenPaths: []string{"/healthz"}})
	if resp, _, err := g2.do(t, c, "GET", "/schemas/audit", nil); err != nil || resp.StatusCode != 401 {
		t.Errorf("GET /schemas/audit without the open path: %v %v, want 401", resp, err)
	}
	if resp, _, err := g2.do(t, c, "GET", "/schemas/audit", nil, "Authorization", "Bearer "+testToken); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /schemas/audit with the token: %v %v, want 200", resp, err)
	}
}
