package client

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// handChain builds an honest chain of n records with crypto/sha256 directly, the
// obviously-correct reference for the rule Hash = SHA-256(prev bytes || body), prev of
// seq 1 being 32 zero bytes.
func handChain(n int) []chainRecord {
	prev := make([]byte, 32)
	out := make([]chainRecord, n)
	for i := range out {
		body := fmt.Sprintf(`{"request":"r%d","id":"p%d","seq":%d}`, i+1, i+1, i+1)
		h := sha256.Sum256(append(append([]byte(nil), prev...), body...))
		out[i] = chainRecord{Seq: uint64(i + 1), PrevHash: hex.EncodeToString(prev), Hash: hex.EncodeToString(h[:]), Body: body, Where: fmt.Sprintf("t/0@%d", i)}
		prev = h[:]
	}
	return out
}

// rehash recomputes r.Hash from r.PrevHash and r.Body, so that a test can break one
// link without also breaking the record's own hash.
func rehash(r chainRecord) chainRecord {
	p, _ := hex.DecodeString(r.PrevHash)
	h := sha256.Sum256(append(p, r.Body...))
	r.Hash = hex.EncodeToString(h[:])
	return r
}

func TestVerifyChain(t *testing.T) {
	const n = 6
	honest := handChain(n)
	head := honest[n-1].Hash
	clone := func() []chainRecord { return append([]chainRecord(nil), honest...) }
	for _, tc := range []struct {
		name    string
		recs    func() []chainRecord
		wantOK  bool
		wantBad uint64 // 0: no first_bad_seq
		wantRec int
		wantDup int
		reason  string // substring of the reason
	}{
		{name: "honest", recs: clone, wantOK: true, wantRec: n},
		{name: "empty", recs: func() []chainRecord { return nil }, wantOK: true},
		{name: "honest shuffled with duplicates", recs: func() []chainRecord {
			r := append(clone(), honest[0], honest[3], honest[3], honest[n-1])
			rng.New(1, "cairnctl/test/audit/shuffle").Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
			return r
		}, wantOK: true, wantRec: n, wantDup: 4},
		{name: "tampered body", recs: func() []chainRecord {
			r := clone()
			r[2].Body = strings.Replace(r[2].Body, `"p3"`, `"p9"`, 1)
			return r
		}, wantBad: 3, wantRec: n, reason: "body or hash altered"},
		{name: "tampered hash", recs: func() []chainRecord {
			r := clone()
			r[4].Hash = strings.Repeat("ab", 32)
			return r
		}, wantBad: 5, wantRec: n, reason: "does not match"},
		{name: "broken prev_hash, own hash consistent", recs: func() []chainRecord {
			r := clone()
			r[3].PrevHash = honest[1].Hash // points at seq 2, not seq 3
			r[3] = rehash(r[3])
			return r
		}, wantBad: 4, wantRec: n, reason: "is not the hash of seq 3"},
		{name: "seq 1 prev_hash not zero", recs: func() []chainRecord {
			r := clone()
			r[0].PrevHash = strings.Repeat("11", 32)
			r[0] = rehash(r[0])
			return r
		}, wantBad: 1, wantRec: n, reason: "zero hash"},
		{name: "gap", recs: func() []chainRecord {
			r := clone()
			return append(r[:2], r[3:]...)
		}, wantBad: 3, wantRec: n - 1, reason: "seq 3 missing"},
		{name: "missing seq 1", recs: func() []chainRecord { return clone()[1:] }, wantBad: 1, wantRec: n - 1, reason: "seq 1 missing"},
		{name: "conflicting duplicate", recs: func() []chainRecord {
			r := clone()
			other := r[1]
			other.Body = strings.Replace(other.Body, `"r2"`, `"r2x"`, 1)
			other = rehash(other) // internally consistent, but a second record for seq 2
			other.Where = "t/1@9"
			return append(r, other)
		}, wantBad: 2, wantRec: n, reason: "two different records with seq 2"},
		{name: "prev_hash not hex", recs: func() []chainRecord {
			r := clone()
			r[1].PrevHash = strings.Repeat("zz", 32)
			return r
		}, wantBad: 2, wantRec: n, reason: "not hex"},
		{name: "short hash", recs: func() []chainRecord {
			r := clone()
			r[1].Hash = r[1].Hash[:10]
			return r
		}, wantBad: 2, wantRec: n, reason: "want 64 hex digits"},
		{name: "seq 0", recs: func() []chainRecord {
			r := clone()
			r[0].Seq = 0
			return r
		}, reason: "seq 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verifyChain(tc.recs(), nil)
			if got.OK != tc.wantOK {
				t.Fatalf("ok = %v, want %v (reason %q)", got.OK, tc.wantOK, got.Reason)
			}
			var gotBad uint64
			if got.FirstBadSeq != nil {
				gotBad = *got.FirstBadSeq
			}
			if gotBad != tc.wantBad {
				t.Errorf("first_bad_seq = %d, want %d (reason %q)", gotBad, tc.wantBad, got.Reason)
			}
			if got.Records != tc.wantRec && tc.reason != "seq 0" {
				t.Errorf("records = %d, want %d", got.Records, tc.wantRec)
			}
			if got.Duplicates != tc.wantDup {
				t.Errorf("duplicates = %d, want %d", got.Duplicates, tc.wantDup)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tc.reason)
			}
			switch {
			case tc.wantOK && tc.wantRec > 0 && got.Head != head:
				t.Errorf("head = %s, want %s", got.Head, head)
			case tc.wantBad > 1 && got.Head != honest[tc.wantBad-2].Hash:
				t.Errorf("head = %s, want the hash of seq %d %s (last verified)", got.Head, tc.wantBad-1, honest[tc.wantBad-2].Hash)
			case tc.wantBad == 1 && got.Head != "":
				t.Errorf("head = %s, want empty (nothing verified)", got.Head)
			}
		})
	}
}

// TestVerifyChainMatchesStorage checks that the verifier's rule is the one storage
// implements: a chain written by storage.Tx.AppendAudit verifies, and VerifyStore on
// the file reports the same head and count.
func TestVerifyChainMatchesStorage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cairn.db")
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []chainRecord
	for i := 1; i <= 5; i++ {
		body := fmt.Sprintf(`{"request":"r%d","id":"p%d"}`, i, i)
		err := st.Apply(func(tx *storage.Tx) error {
			l, err := tx.AppendAudit([]byte(body))
			if err != nil {
				return err
			}
			recs = append(recs, chainRecord{Seq: l.Seq, PrevHash: hex.EncodeToString(l.PrevHash[:]), Hash: hex.EncodeToString(l.Hash[:]), Body: body, Where: "store"})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got := verifyChain(recs, nil)
	if !got.OK || got.Records != 5 || got.Head != recs[4].Hash {
		t.Fatalf("verifyChain(storage chain) = %+v, want ok, 5 records, head %s", got, recs[4].Hash)
	}
	rep, err := VerifyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != 5 || rep.Head != recs[4].Hash || rep.FirstBadSeq != nil {
		t.Errorf("VerifyStore = %+v, want ok, 5 records, head %s", rep, recs[4].Hash)
	}

	// A missing file is an error naming the flag, and no file is created.
	if _, err := VerifyStore(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "want the directory holding") {
		t.Errorf("VerifyStore(missing) error = %v, want one saying what the directory should hold", err)
	}
}

// TestVerifyStoreLocked: a store held open (as by a running daemon) is reported as
// locked (ErrLocked), not waited on forever, by VerifyStore and CheckStore.
func TestVerifyStoreLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := CheckStore(filepath.Dir(path), 100*time.Millisecond); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "running daemon") {
		t.Errorf("CheckStore(locked) error = %v, want ErrLocked naming the running daemon", err)
	}
	_, err = VerifyStore(filepath.Dir(path))
	if err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "daemon running") {
		t.Errorf("VerifyStore(locked) error = %v, want one saying the daemon may be running", err)
	}
}

func TestDecodeAuditRecord(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // error substring, "" for success
	}{
		{`{"v":1,"request":"r","id":"p","seq":1,"prev_hash":"00","hash":"11","body":"{}"}`, ""},
		{`{"seq":1,"hash":"11","body":"{}"}`, "missing prev_hash"},
		{`{"prev_hash":"00","hash":"11"}`, "missing seq, body"},
		{`not json`, "not a JSON object"},
		{`{"seq":-1,"prev_hash":"00","hash":"11","body":"{}"}`, "not a JSON object"},
	} {
		_, err := decodeAuditRecord([]byte(tc.in))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("decodeAuditRecord(%s) error %v, want nil", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("decodeAuditRecord(%s) error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

// FuzzVerifyAuditMessages feeds arbitrary audit-topic messages to the verifier: it
// must never panic, and must never accept a message that is not an audit record.
func FuzzVerifyAuditMessages(f *testing.F) {
	rec := handChain(2)
	for _, r := range rec {
		f.Add([]byte(fmt.Sprintf(`{"v":1,"seq":%d,"prev_hash":%q,"hash":%q,"body":%q}`, r.Seq, r.PrevHash, r.Hash, r.Body)))
	}
	f.Add([]byte(`{"seq":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"seq":18446744073709551615,"prev_hash":"","hash":"","body":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep := VerifyMessages([]stream.Message{{Topic: "a", Value: b}}, nil, nil)
		if rep.OK {
			r, err := decodeAuditRecord(b)
			if err != nil || r.Seq != 1 {
				t.Fatalf("VerifyMessages accepted %q (decode %v, seq %d)", b, err, r.Seq)
			}
		}
	})
}

// auditEvent is the event of an audit with body fields equal to its top-level ones,
// chained after prev and signed by s (nil: unsigned).
func auditEvent(t *testing.T, s *auditsig.Signer, seq uint64, prev, request, id string) stream.Audit {
	t.Helper()
	a := stream.Audit{Request: request, ID: id, Known: true, Seq: seq, PrevHash: prev, Percentile: -1, PValue: 1}
	body, err := json.Marshal(map[string]any{"request": request, "id": id, "known": true, "was_landmark": false,
		"model_before": 0, "model_after": 0, "percentile": -1, "p_value": 1})
	if err != nil {
		t.Fatal(err)
	}
	a.Body = string(body)
	a.Hash = rehash(chainRecord{PrevHash: prev, Body: a.Body}).Hash
	if s != nil {
		a.KeyID, a.Sig = s.KeyID(), hex.EncodeToString(s.SignRecord(seq, [32]byte(mustHex(t, prev)), [32]byte(mustHex(t, a.Hash))))
	}
	return a
}

// signedChain is n audit events of a chain, signed by s, as the daemon writes them.
func signedChain(t *testing.T, s *auditsig.Signer, n int) []stream.Message {
	t.Helper()
	var out []stream.Message
	prev := hex.EncodeToString(make([]byte, 32))
	for i := range n {
		a := auditEvent(t, s, uint64(i+1), prev, fmt.Sprintf("r%d", i+1), fmt.Sprintf("p%d", i+1))
		v, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stream.Message{Topic: "cairn.audits", Offset: int64(i), Value: v})
		prev = a.Hash
	}
	return out
}

// TestVerifySignedAudits: with the daemon's key, a genuine signed chain verifies; an
// injected record with a correct chain link but no signature, one signed by another key,
// and a copy of a genuine record with its top-level id changed are each reported as
// forged by where they were read, and the genuine chain still verifies around them.
// Without a key, only the altered copy is caught, and the report says signatures were
// not checked.
func TestVerifySignedAudits(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	other := auditsig.New(append(make([]byte, ed25519.SeedSize-1), 7))
	keys := Keys{s.KeyID(): s.PublicKey()}
	genuine := signedChain(t, s, 3)
	rep := VerifyMessages(genuine, keys, nil)
	if !rep.OK || rep.Records != 3 || rep.Signatures != "verified" || len(rep.Forged) != 0 {
		t.Fatalf("genuine chain: %+v", rep)
	}
	// An injected record continuing the chain, unsigned.
	var last stream.Audit
	if err := json.Unmarshal(genuine[2].Value, &last); err != nil {
		t.Fatal(err)
	}
	injected := auditEvent(t, nil, 4, last.Hash, "fake", "fake")
	vi, _ := injected.Encode()
	// The same, signed by another key.
	vo, _ := auditEvent(t, other, 4, last.Hash, "fake", "fake").Encode()
	// A copy of record 2 with its top-level id changed (signature and chain intact).
	var two map[string]any
	if err := json.Unmarshal(genuine[1].Value, &two); err != nil {
		t.Fatal(err)
	}
	two["id"] = "somebody-else"
	va, _ := json.Marshal(two)
	msgs := append(append([]stream.Message(nil), genuine...),
		stream.Message{Topic: "cairn.audits", Offset: 10, Value: vi},
		stream.Message{Topic: "cairn.audits", Offset: 11, Value: vo},
		stream.Message{Topic: "cairn.audits", Offset: 12, Value: va})
	rep = VerifyMessages(msgs, keys, nil)
	if rep.OK || rep.Records != 3 || rep.FirstBadSeq != nil || rep.Head != last.Hash {
		t.Errorf("with forgeries: ok %v records %d first_bad %v head %s; want not ok, the genuine 3 verified to %s", rep.OK, rep.Records, rep.FirstBadSeq, rep.Head, last.Hash)
	}
	wheres := map[string]string{}
	for _, f := range rep.Forged {
		wheres[f.Where] = f.Reason
	}
	for _, w := range []string{"cairn.audits/0@10", "cairn.audits/0@11", "cairn.audits/0@12"} {
		if wheres[w] == "" {
			t.Errorf("forged %v: %s not reported", rep.Forged, w)
		}
	}
	if !strings.Contains(wheres["cairn.audits/0@12"], "id") {
		t.Errorf("altered copy reported as %q, want the id named", wheres["cairn.audits/0@12"])
	}
	rep = VerifyMessages(msgs, nil, nil)
	if !strings.HasPrefix(rep.Signatures, "not checked") || len(rep.Forged) != 1 || rep.Forged[0].Where != "cairn.audits/0@12" {
		t.Errorf("without a key: signatures %q, forged %+v; want only the altered copy", rep.Signatures, rep.Forged)
	}
}

// TestAuditKeyFile: a pinned key file in either form (the JSON of audit key, or hex
// lines) gives the key by its id; garbage is refused.
func TestAuditKeyFile(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	dir := t.TempDir()
	js, _ := json.Marshal(daemon.AuditKey{PublicKey: s.PublicKeyHex(), KeyID: s.KeyID()})
	for name, body := range map[string]string{"json": string(js) + "\n", "hex": s.PublicKeyHex() + "\n"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		keys, err := ReadKeys(path)
		if err != nil || !keys[s.KeyID()].Equal(s.PublicKey()) || len(keys) != 1 {
			t.Errorf("%s: %v, %v", name, keys, err)
		}
	}
	path := filepath.Join(dir, "bad")
	os.WriteFile(path, []byte("zz"), 0o644)
	if _, err := ReadKeys(path); err == nil {
		t.Error("garbage key file accepted")
	}
}

// TestVerifyFromCheckpoint: when retention removed the first records, the chain
// verifies from a checkpoint of the last removed one (its hash is the next record's
// prev_hash), not from seq 1, and a checkpoint with another hash does not anchor it.
func TestVerifyFromCheckpoint(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	keys := Keys{s.KeyID(): s.PublicKey()}
	chain := signedChain(t, s, 5)
	var second stream.Audit
	if err := json.Unmarshal(chain[1].Value, &second); err != nil {
		t.Fatal(err)
	}
	retained := chain[2:] // seqs 3, 4, 5
	if rep := VerifyMessages(retained, keys, nil); rep.OK {
		t.Fatalf("a chain without its first records verified from seq 1: %+v", rep)
	}
	cp := &daemon.Checkpoint{Seq: 2, Hash: second.Hash, KeyID: s.KeyID()}
	rep := VerifyMessages(retained, keys, cp)
	if !rep.OK || rep.Records != 3 || rep.FromCheckpoint == nil || *rep.FromCheckpoint != 2 {
		t.Errorf("from the checkpoint of seq 2: %+v", rep)
	}
	bad := &daemon.Checkpoint{Seq: 2, Hash: strings.Repeat("ab", 32)}
	if rep := VerifyMessages(retained, keys, bad); rep.OK || rep.FirstBadSeq == nil || *rep.FirstBadSeq != 3 {
		t.Errorf("from a checkpoint with another hash: %+v, want failure at seq 3", rep)
	}
}
func TestDeadLetterOf(t *testing.T) {
	sent := []byte(`{"v":1,"request":"q1","x":[1,2]}`)
	long := []byte(`{"v":1,"request":"q2","x":[` + strings.Repeat("0.123456789,", stream.MaxDeadLetterRaw/12+10) + `1]}`)
	dl := func(src stream.Message) stream.DeadLetter {
		return stream.NewDeadLetter(src, &stream.RejectError{Reason: stream.ReasonWrongDim, Field: "x", Msg: "test"})
	}
	for _, tc := range []struct {
		name string
		dl   stream.DeadLetter
		key  []byte
		sent []byte
		want bool
	}{
		{"exact", dl(stream.Message{Topic: "q", Key: []byte("q1"), Value: sent}), []byte("q1"), sent, true},
		{"truncated copy of ours", dl(stream.Message{Topic: "q", Key: []byte("q2"), Value: long}), []byte("q2"), long, true},
		{"other topic", dl(stream.Message{Topic: "t", Key: []byte("q1"), Value: sent}), []byte("q1"), sent, false},
		{"other key", dl(stream.Message{Topic: "q", Key: []byte("q9"), Value: sent}), []byte("q1"), sent, false},
		{"same key, other body", dl(stream.Message{Topic: "q", Key: []byte("q1"), Value: []byte(`{"v":1,"request":"q1","x":[1,3]}`)}), []byte("q1"), sent, false},
		{"same prefix, other length", dl(stream.Message{Topic: "q", Key: []byte("q2"), Value: append(slices.Clone(long), ' ')}), []byte("q2"), long, false},
	} {
		if got := deadLetterOf(tc.dl, "q", tc.key, tc.sent); got != tc.want {
			t.Errorf("%s: deadLetterOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
