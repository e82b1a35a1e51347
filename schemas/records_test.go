package schemas_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/query"
	"github.com/cairnhq/cairn/internal/refit"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/schemas"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// Real records: each made by the code that writes it to its topic (stream's encoders
// and output types, internal/query's answers and dead letters, internal/ingest's
// audits, internal/refit's and the daemon's status events), then validated against its
// schema; and a mutation of each that the schema must refuse, so the check can fail.

// TestInputRecords: stream's encoders (what cairnctl and package client send) write
// records valid under train-upsert, train-delete, train and query.
func TestInputRecords(t *testing.T) {
	lim := stream.Limits{InputDim: 2}
	label := int64(-3)
	for _, c := range []struct {
		name string
		ev   stream.TrainEvent
	}{
		{"train-upsert", stream.TrainEvent{Op: stream.OpUpsert, ID: "p1", X: []float64{0.5, -1e300}}},
		{"train-upsert", stream.TrainEvent{Op: stream.OpUpsert, ID: "点 7", X: []float64{0, 5e-324}, Label: &label}},
		{"train-delete", stream.TrainEvent{Op: stream.OpDelete, ID: "p1", Request: "r9"}},
	} {
		b, err := stream.EncodeTrain(c.ev, lim)
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, c.name, "EncodeTrain", b)
		mustValid(t, "train", "EncodeTrain", b)
		other := map[string]string{"train-upsert": "train-delete", "train-delete": "train-upsert"}[c.name]
		if validate(t, other, b) == nil {
			t.Errorf("%s is valid under %s too", b, other)
		}
	}
	for _, ev := range []stream.QueryEvent{
		{Request: "q1", X: []float64{0.5, 1}, K: 10, Delta: 0.05},
		{Request: "q2", ID: "p7", Score: "representer"},
		{Request: "q3", ID: "p7", K: stream.DefaultMaxK, Delta: 1e-300},
	} {
		b, err := stream.EncodeQuery(ev, lim)
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, "query", "EncodeQuery", b)
	}
	for _, bad := range []string{
		`{"v":1,"request":"q","x":[1,2],"id":"p"}`, `{"v":1,"request":"q"}`, `{"v":1,"request":"q","id":"p","k":0}`,
		`{"v":1,"request":"q","id":"p","score":"influence"}`, `{"v":2,"request":"q","id":"p"}`,
	} {
		if validate(t, "query", []byte(bad)) == nil {
			t.Errorf("query schema accepts %s", bad)
		}
	}
}

// TestErasureRecords: the erasure requests of the cairn.erasures topic, as
// stream.EncodeErasure writes them and docs/events.md shows them.
func TestErasureRecords(t *testing.T) {
	for _, raw := range []string{
		`{"v":1,"op":"erase","subject":"S","request":"r"}`,
		`{"v":1,"op":"unblock","subject":"user-42@example.org","request":"r2"}`,
	} {
		mustValid(t, "erasure", "erasure request", []byte(raw))
	}
	for _, raw := range []string{
		`{"v":1,"op":"delete","subject":"S","request":"r"}`, `{"v":1,"op":"erase","subject":"","request":"r"}`,
		`{"v":1,"op":"erase","request":"r"}`, `{"v":1,"op":"erase","subject":"S","request":"r","id":"p"}`,
	} {
		if validate(t, "erasure", []byte(raw)) == nil {
			t.Errorf("erasure schema accepts %s", raw)
		}
	}
}

// TestDeadLetterRecords: dead letters as stream builds them (with and without the raw
// bytes, an oversize input, a non-reject error) and as the query path writes them.
func TestDeadLetterRecords(t *testing.T) {
	src := stream.Message{Topic: "cairn.train", Partition: 2, Offset: 41, Key: []byte("p1"), Value: []byte(`{"v":1,"op":"upsert"`)}
	_, rerr := stream.DecodeTrain(src.Value, stream.Limits{InputDim: 2})
	big := src
	big.Value = make([]byte, 2*stream.MaxDeadLetterRaw)
	for _, c := range []struct {
		src  stream.Message
		err  error
		keep bool
	}{{src, rerr, true}, {src, rerr, false}, {big, rerr, true}, {src, errors.New("disk full"), true}, {stream.Message{}, rerr, false}} {
		m, err := stream.DeadLetterMessage("cairn.dlq", c.src, c.err, c.keep)
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, "deadletter", "DeadLetterMessage", m.Value)
	}
	cfg := config.Default()
	lim, err := query.Limits(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := query.New(query.Config{Daemon: cfg, Limits: lim, Log: zerolog.Nop(), Metrics: metrics.New(), UI: ui.NewRecorder(4, 4)})
	batch := []stream.Message{
		{Topic: cfg.Kafka.Topics.Queries, Offset: 0, Value: []byte("{")},
		{Topic: cfg.Kafka.Topics.Queries, Offset: 1, Value: []byte(`{"v":1,"request":"q","id":"p1"}`)},
	}
	for _, o := range a.Batch(nil, nil, batch, nil) {
		mustValid(t, "deadletter", "query dead letter", o.Value)
	}
	dl := stream.NewDeadLetter(src, rerr)
	dl.Reason = "not_a_reason"
	b, err := dl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if validate(t, "deadletter", b) == nil {
		t.Errorf("deadletter schema accepts reason %q", dl.Reason)
	}
}

// TestAuditRecords: audits as the deletion path writes them (internal/ingest.AppendAudit
// into a real store's outbox), signed and unsigned, of a known and of an unknown id.
func TestAuditRecords(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "cairn.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sig := auditsig.New(make([]byte, 32))
	done := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	err = st.Apply(func(tx *storage.Tx) error {
		for i, rec := range []*ingest.Deletion{
			{Request: "r1", ID: "p1", Known: true, WasLandmark: true, ModelBefore: 3, Requested: done, Applied: done, Source: "cairn.train/0/7"},
			{Request: "r2", ID: "nobody", Known: false, Source: "cairn.train/1/9"},
		} {
			s := sig
			if i == 1 {
				s = nil
			}
			if _, err := ingest.AppendAudit(tx, "cairn.audits", rec, nil, done, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.Pending(0)
	if err != nil || len(out) != 2 {
		t.Fatalf("%d outbox entries, %v; want 2", len(out), err)
	}
	for _, e := range out {
		mustValid(t, "audit", "AppendAudit", e.Value)
	}
	// The coming erasure audit: the deletion audit's fields, the subject's hash and the
	// erased points.
	var m map[string]any
	if err := json.Unmarshal(out[0].Value, &m); err != nil {
		t.Fatal(err)
	}
	m["subject_hash"] = "5d41402abc4b2a76b9719d911017c592ae7b1ea8c2c0c2f1b1e1c2d3e4f5a6b7"
	m["points"] = []map[string]any{{"id": "p1", "was_landmark": true}, {"id": "p2"}}
	m["id"] = ""
	b, _ := json.Marshal(m)
	mustValid(t, "audit", "erasure audit", b)
	for _, mut := range []func(map[string]any){
		func(m map[string]any) { delete(m, "subject_hash") }, // points without the subject
		func(m map[string]any) { m["subject"] = "alice" },    // the raw subject
		func(m map[string]any) { delete(m, "points") },       // a deletion audit with an empty id
	} {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		mut(c)
		b, _ := json.Marshal(c)
		if validate(t, "audit", b) == nil {
			t.Errorf("audit schema accepts %s", b)
		}
	}
}

// TestStatusRecords: status events as internal/refit and the daemon write them (the
// daemon's statusValue is json.Marshal of the data into stream.Status).
func TestStatusRecords(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	ft := &refit.Fitted{Meta: serving.Meta{ID: "m-abc", Points: 40, Train: 32, Val: 8, SelectedBy: "val_loss", BestEpoch: 3}}
	b, err := ft.StatusEvent(7, "points_changed", 2, 1.25, at)
	if err != nil {
		t.Fatal(err)
	}
	mustValid(t, "status", "refit status", b)
	sig := auditsig.New(make([]byte, 32))
	head := sha256.Sum256([]byte("chain head"))
	status := func(kind string, data any) []byte {
		t.Helper()
		d, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := stream.Status{Kind: kind, Time: at, Data: d}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		kind string
		data any
	}{
		{"audit_checkpoint", daemon.Checkpoint{Seq: 4, Hash: hex.EncodeToString(head[:]), KeyID: sig.KeyID(), Sig: hex.EncodeToString(sig.SignCheckpoint(4, head))}},
		{"audit_key", daemon.AuditKey{PublicKey: sig.PublicKeyHex(), KeyID: sig.KeyID()}},
		{"model", map[string]any{"version": 0, "points": 3, "reason": "fewer stored points than refit.min_points: no model"}},
		{"drift", map[string]any{"reason": "points", "changes": 12}},
	} {
		mustValid(t, "status", c.kind+" status", status(c.kind, c.data))
	}
	for _, c := range []struct {
		kind string
		data any
	}{
		{"audit_checkpoint", daemon.Checkpoint{Seq: 4, Hash: "xyz"}},
		{"audit_key", map[string]any{"key_id": "k"}},
		{"model", map[string]any{"points": 3}},
	} {
		if b := status(c.kind, c.data); validate(t, "status", b) == nil {
			t.Errorf("status schema accepts %s", b)
		}
	}
}

// TestAttributionRecords: answers as internal/query writes them, on a small served
// model, exact (exact eNTK rows, in memory or on disk: "exact_rows") and sketched (an
// evaluation draw, with seed_hash and no exact_rows).
func TestAttributionRecords(t *testing.T) {
	const dim, m, k = 3, 6, 4
	b, err := entk.NewBackbone("mlp:3-8-4", 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	in := serving.Input{Version: 2, ID: "m-test", Points: 20, Scale: 1,
		LandmarkIDs: []string{"a", "b", "c", "d", "e", "f"}, Views: []byte("AAABBB"),
		LandmarkX: make([]float64, m*dim), A: mat.NewDense(m, k, nil), B: make([]float64, k), Omega: make([]float64, m),
		Residual: [2]certify.Residual{{TraceR: 0.5, TraceK: 4, Exact: true}, {TraceR: 0.25, TraceK: 4, Exact: true}}}
	for i := range in.LandmarkX {
		in.LandmarkX[i] = r.NormFloat64()
	}
	for i := range m {
		in.Omega[i] = 0.1 + r.Float64()
		for j := range k {
			in.A.Set(i, j, r.NormFloat64())
		}
	}
	cfg := config.Default()
	lim, err := query.Limits(cfg, dim)
	if err != nil {
		t.Fatal(err)
	}
	res := func() ([2]coreset.ResidualCertificate, bool) {
		return [2]coreset.ResidualCertificate{{Trace: 0.5, TraceK: 4, Exact: true}, {Trace: 0.25, TraceK: 4}}, true
	}
	a := query.New(query.Config{Daemon: cfg, Limits: lim, Log: zerolog.Nop(), Metrics: metrics.New(), UI: ui.NewRecorder(4, 4), Residuals: res})
	for _, c := range []struct {
		exactBytes int64
		disk       *serving.Disk
		rows       string // the answers' "exact_rows"
	}{
		{1 << 30, nil, "memory"},
		{1, serving.NewDisk(t.TempDir(), 1<<30), "disk"}, // rows past the memory budget, in a mapped file
		{0, nil, ""},
	} {
		exactBytes := c.exactBytes
		s, err := serving.New(in, serving.Settings{Backbone: b, H: 2, S: 16, Seed: 9, DrawName: "test/eval",
			ExactMemoryBytes: exactBytes, ExactDisk: c.disk, Fits: 1, ExactRowsCap: 1 << 20, StableJaccard: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		var batch []stream.Message
		for i, ev := range []stream.QueryEvent{
			{Request: "q1", X: []float64{0.1, -0.2, 0.3}, K: 2},
			{Request: "q2", X: []float64{1, 1, 1}, K: 3, Score: "displacement", Delta: 0.01},
			{Request: "q3", X: []float64{-1, 0, 2}, K: 1, Score: "representer"},
		} {
			v, err := stream.EncodeQuery(ev, lim)
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, stream.Message{Topic: cfg.Kafka.Topics.Queries, Offset: int64(i), Key: []byte(ev.Request), Value: v})
		}
		for _, o := range a.Batch(&serving.Workspace{}, s, batch, nil) {
			if o.Topic != cfg.Kafka.Topics.Attributions {
				t.Fatalf("exact %v: not an answer: %s", exactBytes > 0, o.Value)
			}
			mustValid(t, "attribution", "answer", o.Value)
			var at map[string]any
			if err := json.Unmarshal(o.Value, &at); err != nil {
				t.Fatal(err)
			}
			if _, sketched := at["seed_hash"]; sketched != (exactBytes == 0) || len(at["topk"].([]any)) == 0 {
				t.Errorf("exact %v: %s", exactBytes > 0, o.Value)
			}
			if rows, _ := at["exact_rows"].(string); rows != c.rows {
				t.Errorf("exact_rows %q, want %q: %s", rows, c.rows, o.Value)
			}
			if c.rows != "" {
				at["exact_rows"] = "tape"
				bad, err := json.Marshal(at)
				if err != nil {
					t.Fatal(err)
				}
				if validate(t, "attribution", bad) == nil {
					t.Errorf("attribution schema accepts exact_rows %q", at["exact_rows"])
				}
				at["exact_rows"] = c.rows
			}
			at["verdict"] = "maybe"
			bad, err := json.Marshal(at)
			if err != nil {
				t.Fatal(err)
			}
			if validate(t, "attribution", bad) == nil {
				t.Errorf("attribution schema accepts verdict %q", at["verdict"])
			}
		}
	}
}

// TestDeadLetterReasons: the dead-letter schema's reasons are exactly stream's Reason
// constants (read from stream's source) and "internal", so a new reason cannot be
// written without its schema.
func TestDeadLetterReasons(t *testing.T) {
	files, err := filepath.Glob("../stream/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("stream's sources: %v", err)
	}
	want := []string{"internal"}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: a Reason that is not a literal", fset.Position(v.Pos()))
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, s)
				}
			}
		}
	}
	b, _ := schemas.Get("deadletter")
	var doc struct {
		Properties struct {
			Reason struct {
				Enum []string `json:"enum"`
			} `json:"reason"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Properties.Reason.Enum
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 10 || !slices.Equal(got, want) {
		t.Errorf("deadletter reasons %v, want stream's %v", got, want)
	}
}
