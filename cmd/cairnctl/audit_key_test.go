package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/stream"
)

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
	keys := auditKeys{s.KeyID(): s.PublicKey()}
	genuine := signedChain(t, s, 3)
	rep := verifyRecords(genuine, keys)
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
	rep = verifyRecords(msgs, keys)
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
	rep = verifyRecords(msgs, nil)
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
		keys, err := readAuditKeyFile(path)
		if err != nil || !keys[s.KeyID()].Equal(s.PublicKey()) || len(keys) != 1 {
			t.Errorf("%s: %v, %v", name, keys, err)
		}
	}
	path := filepath.Join(dir, "bad")
	os.WriteFile(path, []byte("zz"), 0o644)
	if _, err := readAuditKeyFile(path); err == nil {
		t.Error("garbage key file accepted")
	}
}

// TestAuditKeyCommand: `audit key` prints the daemon's /audit/key, and a daemon that
// does not answer is an error naming the address.
func TestAuditKeyCommand(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	want := daemon.AuditKey{PublicKey: s.PublicKeyHex(), KeyID: s.KeyID()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/audit/key" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	code, out, errs := runCmd("audit", "key", "--http", srv.URL)
	var got daemon.AuditKey
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got != want {
		t.Errorf("audit key: exit %d, %s (%v), stderr %s; want %+v", code, out, err, errs, want)
	}
	if code, _, errs := runCmd("audit", "key", "--http", "127.0.0.1:1", "--timeout", "1s"); code == 0 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("audit key of no daemon: exit %d, stderr %q", code, errs)
	}
}

// TestVerifyFromCheckpoint: when retention removed the first records, the chain
// verifies from a checkpoint of the last removed one (its hash is the next record's
// prev_hash), not from seq 1, and a checkpoint with another hash does not anchor it.
func TestVerifyFromCheckpoint(t *testing.T) {
	s := auditsig.New(make([]byte, ed25519.SeedSize))
	keys := auditKeys{s.KeyID(): s.PublicKey()}
	chain := signedChain(t, s, 5)
	var second stream.Audit
	if err := json.Unmarshal(chain[1].Value, &second); err != nil {
		t.Fatal(err)
	}
	retained := chain[2:] // seqs 3, 4, 5
	if rep := verifyRecords(retained, keys); rep.OK {
		t.Fatalf("a chain without its first records verified from seq 1: %+v", rep)
	}
	cp := &daemon.Checkpoint{Seq: 2, Hash: second.Hash, KeyID: s.KeyID()}
	rep := verifyRecordsFrom(retained, keys, cp)
	if !rep.OK || rep.Records != 3 || rep.FromCheckpoint == nil || *rep.FromCheckpoint != 2 {
		t.Errorf("from the checkpoint of seq 2: %+v", rep)
	}
	bad := &daemon.Checkpoint{Seq: 2, Hash: strings.Repeat("ab", 32)}
	if rep := verifyRecordsFrom(retained, keys, bad); rep.OK || rep.FirstBadSeq == nil || *rep.FirstBadSeq != 3 {
		t.Errorf("from a checkpoint with another hash: %+v, want failure at seq 3", rep)
	}
}
