package lineage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden event in testdata")

// The official schemas committed in testdata (see testdata/README.md), by their $id.
var official = map[string]struct{ file, sha256 string }{
	"https://openlineage.io/spec/2-0-2/OpenLineage.json": {"OpenLineage.json", "69f68bee00b9beac88a87059c0102410e7bb05f3f43c46d02a0409831eceb0d2"},
	"https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json": {"DatasetVersionDatasetFacet.json",
		"91f57b67bc6d639bb6d600e26b827dac551e3520a233d1785d65870da263dc34"},
	"https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json": {"ErrorMessageRunFacet.json",
		"b11b4ee8b0f99f6846264f87cad48390255c7ef142ce623216660c7097be0ea6"},
}

var (
	compilerOnce sync.Once
	compiler     *jsonschema.Compiler
	compilerErr  error
	compiledMu   sync.Mutex
	compiledURL  = map[string]*jsonschema.Schema{}
)

// schemaAt compiles (once) the schema at url: OpenLineage's committed files and
// cairn's embedded schemas are the only resources, formats (uuid, date-time, uri) are
// asserted, and nothing is fetched.
func schemaAt(t *testing.T, url string) *jsonschema.Schema {
	t.Helper()
	compilerOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		add := func(id string, b []byte) {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err == nil {
				err = c.AddResource(id, doc)
			}
			compilerErr = errors.Join(compilerErr, err)
		}
		for id, f := range official {
			b, err := os.ReadFile(filepath.Join("testdata", f.file))
			compilerErr = errors.Join(compilerErr, err)
			add(id, b)
		}
		for _, n := range schemas.Names() {
			b, _ := schemas.Get(n)
			add(schemas.URI(n), b)
		}
		compiler = c
	})
	if compilerErr != nil {
		t.Fatal(compilerErr)
	}
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if s, ok := compiledURL[url]; ok {
		return s
	}
	s, err := compiler.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", url, err)
	}
	compiledURL[url] = s
	return s
}

// checkEvent validates the encoded event against the official RunEvent schema and
// cairn's lineage schema, and every facet in it against its own _schemaURL, which
// must be one of the expected ones; it returns the facets' names by _schemaURL.
func checkEvent(t *testing.T, e RunEvent) map[string]int {
	t.Helper()
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{RunEventSchemaURL, schemas.URI("lineage")} {
		if err := schemaAt(t, url).Validate(inst); err != nil {
			t.Errorf("%s event %s is not valid under %s: %v", e.EventType, b, url, err)
		}
	}
	facets := map[string]int{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if u, ok := v["_schemaURL"].(string); ok {
				facets[u]++
				if v["_producer"] != e.Producer {
					t.Errorf("facet %v: _producer %v, want %s", v, v["_producer"], e.Producer)
				}
				if err := schemaAt(t, u).Validate(v); err != nil {
					t.Errorf("facet %v is not valid under its _schemaURL %s: %v", v, u, err)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(inst)
	return facets
}

func testProducer() Producer {
	return Producer{URI: "https://github.com/cairnhq/cairn/tree/v0.0.0-test", Kafka: "kafka://127.0.0.1:9092"}
}

func testRefit() Refit {
	return Refit{Job: Job{Namespace: "cairn-test", Name: "refit"}, Previous: 6,
		Train: Topic{Name: "cairn.train", Offsets: []Offsets{{Partition: 1, First: 0, Last: 99}, {Partition: 0, First: 5, Last: 120}}}}
}

func testErasure() Erasure {
	h := sha256.Sum256([]byte("not the subject"))
	return Erasure{Job: Job{Namespace: "cairn-test", Name: "erasure"}, Request: "r-7", SubjectHash: hex.EncodeToString(h[:]),
		Erasures: Topic{Name: "cairn.erasures", Offsets: []Offsets{{Partition: 0, First: 41, Last: 41}}}}
}

func testOutcome() Outcome {
	cov, pts := 0.75, 3
	return Outcome{Models: "cairn.models", Version: 7, ModelID: "m-3f2a", Coverage: &cov, Audits: "cairn.audits",
		Residual: []ViewResidual{{View: "A", TraceR: 0.125, TraceK: 40, Exact: true}, {View: "B", TraceR: 0.5, TraceK: 41}},
		AuditSeq: 12, AuditHash: strings.Repeat("ab", 32), Points: &pts}
}

// TestEventsValidate: every builder's event is valid under OpenLineage 2-0-2 and cairn's
// lineage schema, carries the facets its transition promises, each valid under its
// own _schemaURL, and the three events of a run share its id.
func TestEventsValidate(t *testing.T) {
	p, at := testProducer(), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r, x, out := testRefit(), testErasure(), testOutcome()
	build := []struct {
		name   string
		make   func() (RunEvent, error)
		runID  string
		facets []string // the _schemaURL defs the event must carry
	}{
		{"refit start", func() (RunEvent, error) { return p.RefitStart(r, at) }, r.RunID(), []string{"OffsetsInputDatasetFacet"}},
		{"refit complete", func() (RunEvent, error) { return p.RefitComplete(r, out, at) }, r.RunID(),
			[]string{"OffsetsInputDatasetFacet", "ModelRunFacet", "CertificateRunFacet", "CoverageRunFacet", "AuditChainRunFacet", DatasetVersionSchemaURL}},
		{"refit fail", func() (RunEvent, error) { return p.RefitFail(r, "fit: loss is NaN", at) }, r.RunID(),
			[]string{"OffsetsInputDatasetFacet", ErrorMessageSchemaURL}},
		{"erasure start", func() (RunEvent, error) { return p.ErasureStart(x, at) }, x.RunID(), []string{"OffsetsInputDatasetFacet", "ErasureRunFacet"}},
		{"erasure complete", func() (RunEvent, error) { return p.ErasureComplete(x, out, at) }, x.RunID(),
			[]string{"OffsetsInputDatasetFacet", "ErasureRunFacet", "ModelRunFacet", "AuditChainRunFacet", DatasetVersionSchemaURL}},
		{"erasure fail", func() (RunEvent, error) { return p.ErasureFail(x, "broker unreachable", at) }, x.RunID(),
			[]string{"OffsetsInputDatasetFacet", "ErasureRunFacet", ErrorMessageSchemaURL}},
		{"refit complete, no model", func() (RunEvent, error) { return p.RefitComplete(r, Outcome{}, at) }, r.RunID(),
			[]string{"OffsetsInputDatasetFacet"}},
	}
	for _, c := range build {
		e, err := c.make()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if e.Run.RunID != c.runID {
			t.Errorf("%s: run id %s, want %s", c.name, e.Run.RunID, c.runID)
		}
		got := checkEvent(t, e)
		for _, f := range c.facets {
			if !strings.HasPrefix(f, "https://") {
				f = FacetSchemaURL(f)
			}
			if got[f] == 0 {
				t.Errorf("%s: no facet %s (facets %v)", c.name, f, got)
			}
		}
		b, _ := e.Encode()
		if strings.Contains(string(b), "not the subject") {
			t.Errorf("%s: the subject itself is in the event", c.name)
		}
	}
	if r.RunID() == x.RunID() {
		t.Error("a refit and an erasure share a run id")
	}
}

// TestRunIDs: run ids are UUIDs version 5 (checked against RFC 9562's construction on
// a published vector), equal for the same run however its offsets are listed, and
// different when anything that names the run differs.
func TestRunIDs(t *testing.T) {
	dns := [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	// Python: uuid.uuid5(uuid.NAMESPACE_DNS, "python.org").
	if got := formatUUID(uuid5(dns, []byte("python.org"))); got != "886313e1-3b8a-5372-9b90-0c9aee199e5d" {
		t.Errorf("uuid5(DNS, python.org) = %s", got)
	}
	if got := formatUUID(namespace); got != Namespace {
		t.Errorf("namespace %s, want Namespace %s", got, Namespace)
	}
	base := testRefit()
	id := base.RunID()
	if len(id) != 36 || id[14] != '5' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Errorf("run id %s is not a UUID version 5, variant 10", id)
	}
	swapped := testRefit()
	swapped.Train.Offsets[0], swapped.Train.Offsets[1] = swapped.Train.Offsets[1], swapped.Train.Offsets[0]
	if swapped.RunID() != id {
		t.Error("listing the offsets in another order changed the run id")
	}
	ids := map[string]string{id: "base"}
	for name, mod := range map[string]func(*Refit){
		"namespace": func(r *Refit) { r.Job.Namespace = "other" },
		"name":      func(r *Refit) { r.Job.Name = "refit2" },
		"topic":     func(r *Refit) { r.Train.Name = "cairn.train2" },
		"last":      func(r *Refit) { r.Train.Offsets[0].Last++ },
		"partition": func(r *Refit) { r.Train.Offsets = r.Train.Offsets[:1] },
		"previous":  func(r *Refit) { r.Previous++ },
		"shifted":   func(r *Refit) { r.Job.Namespace, r.Job.Name = "cairn-testr", "efit" },
	} {
		r := testRefit()
		mod(&r)
		if other, dup := ids[r.RunID()]; dup {
			t.Errorf("refits %s and %s share run id %s", name, other, r.RunID())
		}
		ids[r.RunID()] = name
	}
	x := testErasure()
	y := x
	y.Request = "r-8"
	if x.RunID() == y.RunID() {
		t.Error("two erasure requests share a run id")
	}
}

// TestGolden: a refit's COMPLETE event is byte for byte the committed one (-update
// rewrites it), so a replay that passes the same run and time writes the same record.
func TestGolden(t *testing.T) {
	e, err := testProducer().RefitComplete(testRefit(), testOutcome(), time.Date(2026, 5, 1, 12, 0, 0, 500, time.FixedZone("X", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "refit_complete.golden.json")
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("event\n%s\nwant (testdata, -update to rewrite)\n%s", pretty.Bytes(), want)
	}
}

// TestInvalid: each invalid argument is an error naming it, matching ErrInvalid, and
// all of them are reported at once.
func TestInvalid(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	p, r, x := testProducer(), testRefit(), testErasure()
	nan, neg := -0.5, -1
	for _, c := range []struct {
		name string
		make func() (RunEvent, error)
		want []string
	}{
		{"producer", func() (RunEvent, error) { return Producer{URI: "cairn", Kafka: ""}.RefitStart(r, at) }, []string{"producer.uri", "producer.kafka"}},
		{"job", func() (RunEvent, error) { q := r; q.Job.Name = ""; return p.RefitStart(q, at) }, []string{"job"}},
		{"time", func() (RunEvent, error) { return p.RefitStart(r, time.Time{}) }, []string{"time"}},
		{"offsets", func() (RunEvent, error) {
			q := r
			q.Train.Offsets = []Offsets{{Partition: 0, First: 5, Last: 4}, {Partition: 1, First: 0, Last: 0}, {Partition: 1, First: 1, Last: 1}}
			return p.RefitStart(q, at)
		}, []string{"partition 0, 5 to 4", "partition 1, 1 to 1"}},
		{"reason", func() (RunEvent, error) { return p.RefitFail(r, "", at) }, []string{"reason"}},
		{"subject", func() (RunEvent, error) { q := x; q.SubjectHash = "alice"; return p.ErasureStart(q, at) }, []string{"subject_hash"}},
		{"request", func() (RunEvent, error) { q := x; q.Request = ""; return p.ErasureStart(q, at) }, []string{"erasure.request"}},
		{"outcome", func() (RunEvent, error) {
			return p.RefitComplete(r, Outcome{Version: 3, Residual: []ViewResidual{{View: "C", TraceR: -1}}, Coverage: &nan,
				AuditSeq: 1, AuditHash: "xy", Points: &neg}, at)
		}, []string{"outcome.models", "residual[0].view", "residual[0]", "outcome.coverage", "outcome.audit_hash", "outcome.points"}},
	} {
		_, err := c.make()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", c.name, err, w)
			}
		}
	}
}

// TestArgumentsUnchanged: the builders copy what they keep (offsets are sorted in a
// copy) and leave the caller's slices as they were.
func TestArgumentsUnchanged(t *testing.T) {
	r, out := testRefit(), testOutcome()
	e, err := testProducer().RefitComplete(r, out, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Train.Offsets[0].Partition != 1 {
		t.Error("the caller's offsets were sorted in place")
	}
	out.Residual[0].TraceR = 99
	if e.Run.Facets["cairn_certificate"].(CertificateFacet).Views[0].TraceR == 99 {
		t.Error("the event shares the caller's residual slice")
	}
}

// TestOfficialCopies: the committed OpenLineage schemas are the files testdata/README.md
// names (SHA-256).
func TestOfficialCopies(t *testing.T) {
	for id, f := range official {
		b, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != f.sha256 {
			t.Errorf("%s: SHA-256 %x, want %s", f.file, s, f.sha256)
		}
		if !strings.Contains(string(b), `"$id": "`+id+`"`) {
			t.Errorf("%s: $id is not %s", f.file, id)
		}
	}
}

// TestSchemasRefuse: the validation above can fail: a run id that is no UUID, a time
// that is no RFC 3339 time, a facet without _producer, an unknown event type, and a
// certificate with a third view are each refused by the schema that covers them.
func TestSchemasRefuse(t *testing.T) {
	e, err := testProducer().RefitComplete(testRefit(), testOutcome(), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.Encode()
	for _, c := range []struct {
		name, url string
		mod       func(m map[string]any)
	}{
		{"run id", RunEventSchemaURL, func(m map[string]any) { m["run"].(map[string]any)["runId"] = "run-7" }},
		{"time", RunEventSchemaURL, func(m map[string]any) { m["eventTime"] = "yesterday" }},
		{"producer", RunEventSchemaURL, func(m map[string]any) {
			delete(m["run"].(map[string]any)["facets"].(map[string]any)["cairn_model"].(map[string]any), "_producer")
		}},
		{"event type", schemas.URI("lineage"), func(m map[string]any) { m["eventType"] = "RUNNING" }},
		{"view", schemas.URI("lineage"), func(m map[string]any) {
			f := m["run"].(map[string]any)["facets"].(map[string]any)["cairn_certificate"].(map[string]any)
			f["views"] = append(f["views"].([]any), map[string]any{"view": "C", "traceR": 0, "traceK": 0, "exact": true})
		}},
	} {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		c.mod(m)
		raw, _ := json.Marshal(m)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if schemaAt(t, c.url).Validate(inst) == nil {
			t.Errorf("%s: %s accepts %s", c.name, c.url, raw)
		}
	}
}
