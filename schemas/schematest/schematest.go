// Package schematest validates records against cairn's event schemas (package schemas)
// and OpenLineage's, for the tests of other packages: an end-to-end test checks every
// JSON record the daemon wrote with Validate, and every lineage event with
// ValidateRunEvent. It is a test helper and no part of the daemon (which never validates
// its own outputs by schema; their encoders check them).
//
// # Sources
//
// The cairn schemas are the embedded ones (schemas.Get). The OpenLineage 2-0-2 schema
// and the standard facets' schemas are read from package lineage's test data, which
// this package finds next to its own source file (runtime.Caller): it works where the
// module's source is, as in `go test`, and nowhere else. Nothing is fetched: a
// reference to any other URI fails the compilation.
//
// # Concurrency
//
// The schemas are compiled once, on first use; every function is safe for concurrent
// use.
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/schemas"
)

// OpenLineage is the name Validate knows the OpenLineage 2-0-2 RunEvent by.
const OpenLineage = "openlineage"

// openLineageFiles are the OpenLineage schemas in internal/lineage/testdata, by $id.
var openLineageFiles = map[string]string{
	"https://openlineage.io/spec/2-0-2/OpenLineage.json":                       "OpenLineage.json",
	"https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json": "DatasetVersionDatasetFacet.json",
	"https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json":       "ErrorMessageRunFacet.json",
}

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	errSetup error
)

// compile builds every schema: the embedded ones by name, the RunEvent as OpenLineage,
// and the standard facets by their schema URL (with its #/$defs fragment).
func compile() (map[string]*jsonschema.Schema, error) {
	once.Do(func() {
		_, self, _, ok := runtime.Caller(0)
		if !ok {
			errSetup = fmt.Errorf("schematest: cannot locate the package source")
			return
		}
		dir := filepath.Join(filepath.Dir(self), "..", "..", "internal", "lineage", "testdata")
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		add := func(uri string, b []byte) error {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				return fmt.Errorf("schematest: %s: %w", uri, err)
			}
			return c.AddResource(uri, doc)
		}
		for _, n := range schemas.Names() {
			b, _ := schemas.Get(n)
			if errSetup = add(schemas.URI(n), b); errSetup != nil {
				return
			}
		}
		for uri, file := range openLineageFiles {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err == nil {
				err = add(uri, b)
			}
			if errSetup = err; err != nil {
				return
			}
		}
		out := map[string]string{OpenLineage: "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
			"version":      "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet",
			"errorMessage": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"}
		for _, n := range schemas.Names() {
			out[n] = schemas.URI(n)
		}
		compiled = map[string]*jsonschema.Schema{}
		for n, uri := range out {
			s, err := c.Compile(uri)
			if err != nil {
				errSetup = fmt.Errorf("schematest: compile %s: %w", n, err)
				return
			}
			compiled[n] = s
		}
	})
	return compiled, errSetup
}

// Validate checks raw, one JSON text, against the schema called name (a name of
// schemas.Names, or OpenLineage for the RunEvent). The input schemas' "x" is not bound
// to a deployment's input size here (schemas' package documentation).
func Validate(name string, raw []byte) error {
	all, err := compile()
	if err != nil {
		return err
	}
	s, ok := all[name]
	if !ok {
		return fmt.Errorf("schematest: no schema %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("schematest: %s: %w", name, err)
	}
	return s.Validate(inst)
}

// ValidateRunEvent checks a lineage event: against cairn's lineage schema (which
// includes the OpenLineage RunEvent and cairn's facets), against the OpenLineage
// RunEvent alone, and each standard facet it carries (an output's "version", a FAIL's
// "errorMessage") against that facet's own schema.
func ValidateRunEvent(raw []byte) error {
	for _, n := range []string{"lineage", OpenLineage} {
		if err := Validate(n, raw); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	var ev struct {
		Run struct {
			Facets map[string]json.RawMessage `json:"facets"`
		} `json:"run"`
		Outputs []struct {
			Facets map[string]json.RawMessage `json:"facets"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return err
	}
	if f, ok := ev.Run.Facets["errorMessage"]; ok {
		if err := Validate("errorMessage", f); err != nil {
			return fmt.Errorf("facet errorMessage: %w", err)
		}
	}
	for i, o := range ev.Outputs {
		if f, ok := o.Facets["version"]; ok {
			if err := Validate("version", f); err != nil {
				return fmt.Errorf("outputs[%d] facet version: %w", i, err)
			}
		}
	}
	return nil
}
