package standby

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// TestParseSource: "topic/partition/offset" splits at the last two slashes (topic
// names may hold slashes); anything else is refused.
func TestParseSource(t *testing.T) {
	for _, c := range []struct {
		in    string
		topic string
		part  int
		off   int64
		ok    bool
	}{
		{"cairn.train/3/17", "cairn.train", 3, 17, true},
		{"a/b/0/0", "a/b", 0, 0, true},
		{"cairn.train/3", "", 0, 0, false},
		{"cairn.train/x/1", "", 0, 0, false},
		{"cairn.train/1/y", "", 0, 0, false},
		{"", "", 0, 0, false},
	} {
		topic, part, off, err := parseSource(c.in)
		if (err == nil) != c.ok || topic != c.topic || part != c.part || off != c.off {
			t.Errorf("parseSource(%q) = %q, %d, %d, %v; want %q, %d, %d, ok %v", c.in, topic, part, off, err, c.topic, c.part, c.off, c.ok)
		}
	}
}

// fakeChain is a chain that accepts only the record with hash want at each seq, and
// fails like a full disk while broken is set.
type fakeChain struct {
	head    storage.AuditLink
	want    [32]byte
	applied int64
	broken  bool
	adopted []string // requests
}

func (c *fakeChain) Head() (storage.AuditLink, error) { return c.head, nil }
func (c *fakeChain) Applied(string, int) (int64, bool) {
	return c.applied, c.applied >= 0
}
func (c *fakeChain) Adopt(_ []byte, request, _ string, hash [32]byte) error {
	if c.broken {
		return errors.New("no space left on device")
	}
	if hash != c.want {
		return ingest.ErrAuditDiverged
	}
	c.head = storage.AuditLink{Seq: c.head.Seq + 1, Hash: hash}
	c.adopted = append(c.adopted, request)
	return nil
}

// record is an audit record of seq with hash h over prev, signed by key (nil: under
// another key id), whose deletion is at offset off of the training topic.
func record(t *testing.T, seq uint64, prev, h [32]byte, key *auditsig.Signer, off int64, request string) stream.Audit {
	t.Helper()
	body, err := json.Marshal(ingest.AuditBody{Request: request, Source: fmt.Sprintf("t.train/0/%d", off)})
	if err != nil {
		t.Fatal(err)
	}
	a := stream.Audit{Seq: seq, Request: request, Body: string(body), Hash: hex.EncodeToString(h[:]),
		PrevHash: hex.EncodeToString(prev[:]), KeyID: "another-key"}
	if key != nil {
		a.KeyID, a.Sig = key.KeyID(), hex.EncodeToString(key.SignRecord(seq, prev, h))
	}
	return a
}

func messages(t *testing.T, recs ...stream.Audit) []stream.Message {
	t.Helper()
	var out []stream.Message
	for i, a := range recs {
		v, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stream.Message{Topic: "t.audits", Offset: int64(i), Value: v})
	}
	return out
}

// TestAdopterCandidates: of several records for the next seq, the one that extends the
// chain is adopted and the others (a body that does not decode, a source off the
// training topic, a bad signature under this daemon's key, a diverging record) are
// dropped; a store failure keeps the candidates for the next try; a leader adopts
// nothing.
func TestAdopterCandidates(t *testing.T) {
	key := auditsig.New(bytes.Repeat([]byte{1}, 32))
	var prev, good, bad [32]byte
	good[0], bad[0] = 1, 2
	ch := &fakeChain{want: good, applied: 5}
	leading := false
	m := metrics.New()
	ad := NewAdopter(AdopterConfig{Topic: "t.audits", Train: "t.train", Key: key, Chain: ch,
		Leading: func() bool { return leading }, Faults: fault.NewTracker(zerolog.Nop(), nil), Metrics: m, Log: zerolog.Nop()})
	badBody := record(t, 1, prev, good, key, 0, "bad-body")
	badBody.Body = "{"
	offTopic := record(t, 1, prev, good, key, 0, "off-topic")
	offTopic.Body = `{"source":"elsewhere/0/0"}`
	badSig := record(t, 1, prev, good, key, 0, "bad-sig")
	badSig.Sig = hex.EncodeToString(make([]byte, 64))
	diverging := record(t, 1, prev, bad, nil, 0, "diverging")
	genuine := record(t, 1, prev, good, key, 0, "genuine")
	ctx := context.Background()

	ch.broken = true
	if err := ad.Handle(ctx, messages(t, badBody, genuine)); err == nil {
		t.Fatal("a store failure was not reported")
	}
	if n := len(ad.buf[1]); n != 2 {
		t.Fatalf("%d candidates kept after a store failure, want both for the next try", n)
	}
	ch.broken = false
	if err := ad.Handle(ctx, messages(t, offTopic, badSig, diverging)); err != nil {
		t.Fatal(err)
	}
	if len(ch.adopted) != 1 || ch.adopted[0] != "genuine" || ch.head.Seq != 1 {
		t.Fatalf("adopted %v, head %d; want the genuine record only", ch.adopted, ch.head.Seq)
	}
	if len(ad.buf) != 0 {
		t.Errorf("%d seqs still buffered after adoption", len(ad.buf))
	}
	leading = true
	if err := ad.Handle(ctx, messages(t, record(t, 2, good, good, key, 0, "next"))); err != nil {
		t.Fatal(err)
	}
	if len(ch.adopted) != 1 || len(ad.buf) != 0 {
		t.Errorf("a leader adopted or buffered a record: %v, %d buffered", ch.adopted, len(ad.buf))
	}
}

// TestAdopterWaitsForDeletion: a record is adopted only once the deletion it reports is
// applied here; until then the adopter waits (here until its context ends, which a
// shutdown does: the topic is read again from its start at the next one).
func TestAdopterWaitsForDeletion(t *testing.T) {
	key := auditsig.New(bytes.Repeat([]byte{2}, 32))
	var prev, good [32]byte
	good[0] = 1
	ch := &fakeChain{want: good, applied: -1}
	ad := NewAdopter(AdopterConfig{Topic: "t.audits", Train: "t.train", Key: key, Chain: ch,
		Leading: func() bool { return false }, Faults: fault.NewTracker(zerolog.Nop(), nil), Metrics: metrics.New(), Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ad.Handle(ctx, messages(t, record(t, 1, prev, good, key, 3, "later")))
	if !errors.Is(err, context.Canceled) || len(ch.adopted) != 0 {
		t.Fatalf("Handle = %v, adopted %v; want it to wait for the deletion", err, ch.adopted)
	}
}
