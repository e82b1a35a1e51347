package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/rng"
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
			got := verifyChain(tc.recs())
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
// implements: a chain written by storage.Tx.AppendAudit verifies, and verifyStore on
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
	got := verifyChain(recs)
	if !got.OK || got.Records != 5 || got.Head != recs[4].Hash {
		t.Fatalf("verifyChain(storage chain) = %+v, want ok, 5 records, head %s", got, recs[4].Hash)
	}
	rep, err := verifyStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != 5 || rep.Head != recs[4].Hash || rep.FirstBadSeq != nil {
		t.Errorf("verifyStore = %+v, want ok, 5 records, head %s", rep, recs[4].Hash)
	}

	// A missing file is an error naming the flag, and no file is created.
	if _, err := verifyStore(filepath.Join(dir, "nope", "cairn.db")); err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("verifyStore(missing) error = %v, want one naming --data-dir", err)
	}
}

// TestVerifyStoreLocked: a store held open (as by a running daemon) is reported as
// locked, not waited on forever.
func TestVerifyStoreLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.db")
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = verifyStore(path)
	if err == nil || !strings.Contains(err.Error(), "daemon running") {
		t.Errorf("verifyStore(locked) error = %v, want one saying the daemon may be running", err)
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
		rep := verifyRecords([]stream.Message{{Topic: "a", Value: b}}, nil)
		if rep.OK {
			r, err := decodeAuditRecord(b)
			if err != nil || r.Seq != 1 {
				t.Fatalf("verifyRecords accepted %q (decode %v, seq %d)", b, err, r.Seq)
			}
		}
	})
}
