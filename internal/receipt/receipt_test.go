package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// event is an audit event of body at seq after prev (hex), as the daemon publishes it.
func event(t *testing.T, seq uint64, prev string, b any) (stream.Audit, []byte) {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := hex.DecodeString(prev)
	h := sha256.Sum256(append(p, raw...))
	ev := stream.Audit{Request: "gdpr-1", ID: "h", Known: true, Seq: seq, PrevHash: prev, Hash: hex.EncodeToString(h[:]),
		Body: string(raw), KeyID: "k1", Sig: "00", Percentile: -1, PValue: 1}
	v, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev, v
}

var zero = strings.Repeat("0", 64)

func erasureBody() ingest.SubjectAuditBody {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ts := func(p int, o int64) *ingest.Tombstone {
		return &ingest.Tombstone{Topic: "cairn.train", Partition: p, Offset: o, Policy: "compact"}
	}
	return ingest.SubjectAuditBody{Kind: ingest.KindErasure, Request: "gdpr-1", ID: strings.Repeat("ab", 32),
		SubjectHash: strings.Repeat("ab", 32), Known: true, ModelBefore: 3, ModelAfter: 4, ModelAfterID: "m4",
		Points: []ingest.ErasureAuditPoint{
			{ID: "p9", Tombstone: ts(1, 40)}, {ID: "p2", WasLandmark: true, Tombstone: ts(0, 17)},
			{ID: "p5", Tombstone: ts(1, 12)},
			{ID: "p7", Tombstone: &ingest.Tombstone{Topic: "cairn.train", Partition: -1, Offset: -1, Policy: "compact", Unknown: "not acked"}}},
		Requested: at, Applied: at.Add(time.Second), RefitDone: at.Add(5 * time.Second), Source: "cairn.erasures/0/3"}
}

func genuine(stream.Message, stream.Audit) Verdict {
	return Verdict{Signature: "verified", InChain: true}
}

func TestBuildErasure(t *testing.T) {
	_, v := event(t, 1, zero, erasureBody())
	msgs := []stream.Message{{Topic: "cairn.audits", Key: []byte("gdpr-1"), Value: v},
		{Topic: "cairn.audits", Partition: 0, Offset: 9, Key: []byte("gdpr-1"), Value: v}, // a re-sent copy
		{Topic: "cairn.audits", Key: []byte("other"), Value: []byte(`{"request":"other"}`)}}
	r, err := Build(Input{Request: "gdpr-1", Messages: msgs, Verdict: genuine, Chain: Chain{OK: true, Records: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified || len(r.Problems) != 0 || r.Kind != KindErasure || r.SubjectHash != strings.Repeat("ab", 32) {
		t.Fatalf("receipt %+v: want a verified erasure", r)
	}
	if len(r.Records) != 1 || r.Records[0].Copies != 2 || !r.Records[0].HashOK {
		t.Errorf("records %+v: want one, read twice, hash ok", r.Records)
	}
	var ids []string
	for _, p := range r.Erased.Points {
		ids = append(ids, p.ID)
	}
	if got := strings.Join(ids, ","); got != "p2,p5,p7,p9" {
		t.Errorf("points %s, want p2,p5,p7,p9", got)
	}
	want := []Tombstones{{Topic: "cairn.train", Partition: -1, Offsets: []int64{}, Policy: "compact", Unknown: 1},
		{Topic: "cairn.train", Partition: 0, Offsets: []int64{17}, Policy: "compact"},
		{Topic: "cairn.train", Partition: 1, Offsets: []int64{12, 40}, Policy: "compact"}}
	if got, _ := json.Marshal(r.Erased.Topics); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("tombstones %s, want %s", got, must(json.Marshal(want)))
	}
	if r.Erased.Landmarks != 1 || r.Erased.ModelAfter != 4 || !r.Completed.Equal(erasureBody().RefitDone) {
		t.Errorf("erased %+v, completed %v", r.Erased, r.Completed)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestBuildAltered: an altered copy of the record (its body changed, its hash and
// signature kept) is flagged, the receipt does not verify, and what it states comes
// from the genuine copy.
func TestBuildAltered(t *testing.T) {
	ev, v := event(t, 1, zero, erasureBody())
	altered := ev
	altered.Body = strings.Replace(ev.Body, `"p9"`, `"p8"`, 1)
	av, _ := json.Marshal(altered)
	msgs := []stream.Message{{Topic: "cairn.audits", Offset: 1, Key: []byte("gdpr-1"), Value: v},
		{Topic: "cairn.audits", Offset: 2, Key: []byte("gdpr-1"), Value: av}}
	r, err := Build(Input{Request: "gdpr-1", Messages: msgs, Verdict: genuine, Chain: Chain{OK: false, Reason: "two different records with seq 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || len(r.Records) != 2 || !r.Records[0].OK || r.Records[1].OK || r.Records[1].HashOK {
		t.Fatalf("receipt %+v: want not verified, the second record flagged", r)
	}
	if !strings.Contains(strings.Join(r.Problems, "\n"), "2 different records with seq 1") {
		t.Errorf("problems %q: want the conflict named", r.Problems)
	}
	for _, p := range r.Erased.Points {
		if p.ID == "p8" {
			t.Error("the altered body's point is stated")
		}
	}
}

// TestBuildVerdicts: a record whose signature the verifier refuses, or that is not in
// the verified chain, is flagged; a request without records is ErrNotFound.
func TestBuildVerdicts(t *testing.T) {
	b := ingest.AuditBody{Request: "gdpr-1", ID: "p3", Known: true, ModelBefore: 1, ModelAfter: 2,
		Tombstone: &ingest.Tombstone{Topic: "cairn.train", Partition: 1, Offset: 5, Policy: "compact"}}
	_, v := event(t, 7, zero, b)
	msgs := []stream.Message{{Topic: "cairn.audits", Key: []byte("gdpr-1"), Value: v}}
	for _, tc := range []struct {
		name string
		v    Verdict
	}{
		{"bad signature", Verdict{Signature: "does not verify", InChain: true, Problem: "signature does not verify against key k1"}},
		{"out of chain", Verdict{Signature: "verified"}},
	} {
		r, err := Build(Input{Request: "gdpr-1", Messages: msgs, Verdict: func(stream.Message, stream.Audit) Verdict { return tc.v },
			Chain: Chain{OK: true}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Verified || r.Records[0].OK || r.Kind != KindDeletion || r.PointID != "p3" || len(r.Erased.Points) != 1 {
			t.Errorf("%s: receipt %+v", tc.name, r)
		}
	}
	if _, err := Build(Input{Request: "nope", Messages: msgs, Verdict: genuine}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown request: %v, want ErrNotFound", err)
	}
}
