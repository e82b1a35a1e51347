package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
)

// chainRecord is one audit record as a verifier sees it: the hash-chain fields of the
// event and where it was read.
type chainRecord struct {
	Seq      uint64
	PrevHash string
	Hash     string
	Body     string
	Where    string // "topic/partition@offset" or "store"
	KeyID    string
	Sig      string
	// Mismatch names a top-level field that disagrees with the body ("" when none).
	Mismatch string
}

// verifyChain checks records (in any order, possibly with duplicates) as one hash
// chain after the signed checkpoint cp (nil: from seq 1): seqs cp.Seq+1, cp.Seq+2, …
// (1, 2, … without cp) without gaps, one record per seq (identical copies are dropped
// and counted, different ones fail), the first one's prev_hash the checkpoint's hash
// (the zero hash without cp) and every later one's the previous hash, and hash =
// hex(SHA-256(hex-decoded prev_hash || body)). Records at or below cp.Seq (still
// retained) are left out. It trusts the body only: the other fields of an audit event
// repeat what the body says.
func verifyChain(recs []chainRecord, cp *daemon.Checkpoint) ChainReport {
	var rep ChainReport
	var base uint64
	prev := make([]byte, sha256.Size)
	if cp != nil {
		h, err := decodeHash(cp.Hash)
		if err != nil {
			return ChainReport{Reason: fmt.Sprintf("checkpoint hash: %v", err)}
		}
		base, prev = cp.Seq, h
		rep.FromCheckpoint = &cp.Seq
		kept := recs[:0:0]
		for _, r := range recs {
			if r.Seq > base {
				kept = append(kept, r)
			}
		}
		recs = kept
	}
	fail := func(seq uint64, format string, args ...any) ChainReport {
		if seq > 0 {
			rep.FirstBadSeq = &seq
		}
		rep.Reason = fmt.Sprintf(format, args...)
		return rep
	}
	bySeq := map[uint64]chainRecord{}
	conflict := map[uint64]string{}
	for _, r := range recs {
		if r.Seq == 0 {
			return fail(0, "record at %s has seq 0 (seqs start at 1)", r.Where)
		}
		if old, ok := bySeq[r.Seq]; ok {
			if old.PrevHash == r.PrevHash && old.Hash == r.Hash && old.Body == r.Body {
				rep.Duplicates++
			} else if _, seen := conflict[r.Seq]; !seen {
				conflict[r.Seq] = fmt.Sprintf("two different records with seq %d (at %s and %s)", r.Seq, old.Where, r.Where)
			}
			continue
		}
		bySeq[r.Seq] = r
	}
	rep.Records = len(bySeq)
	seqs := make([]uint64, 0, len(bySeq))
	for s := range bySeq {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, s := range seqs {
		want := base + uint64(i) + 1
		if s != want {
			return fail(want, "seq %d missing (next record present has seq %d)", want, s)
		}
		if why, ok := conflict[s]; ok {
			return fail(s, "%s", why)
		}
		r := bySeq[s]
		p, err := decodeHash(r.PrevHash)
		if err != nil {
			return fail(s, "prev_hash of seq %d at %s: %v", s, r.Where, err)
		}
		if !bytes.Equal(p, prev) {
			what := "the hash of seq " + fmt.Sprint(s-1)
			switch {
			case s == 1:
				what = "the zero hash"
			case s == base+1:
				what = fmt.Sprintf("the checkpoint's hash (seq %d)", base)
			}
			return fail(s, "prev_hash %s of seq %d at %s is not %s (%x)", r.PrevHash, s, r.Where, what, prev)
		}
		h, err := decodeHash(r.Hash)
		if err != nil {
			return fail(s, "hash of seq %d at %s: %v", s, r.Where, err)
		}
		sum := sha256.New()
		sum.Write(p)
		sum.Write([]byte(r.Body))
		if got := sum.Sum(nil); !bytes.Equal(got, h) {
			return fail(s, "hash %s of seq %d at %s does not match SHA-256(prev_hash || body) = %x (body or hash altered)", r.Hash, s, r.Where, got)
		}
		prev = h
		rep.Head = hex.EncodeToString(h)
	}
	rep.OK = true
	return rep
}

// decodeHash decodes a 64-digit hex SHA-256.
func decodeHash(s string) ([]byte, error) {
	if len(s) != 2*sha256.Size {
		return nil, fmt.Errorf("%q: want %d hex digits, got %d characters", truncateText(s, 80), 2*sha256.Size, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%q: not hex: %v", truncateText(s, 80), err)
	}
	return b, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// forgery says why r is not a genuine record, or "": its top-level fields disagree with
// its body, or (with keys) its signature is missing or does not verify against the key
// its key_id names.
func (r chainRecord) forgery(keys Keys) string {
	if r.Mismatch != "" {
		return "top-level " + r.Mismatch + " disagrees with the signed body"
	}
	if keys == nil {
		return ""
	}
	pub, ok := keys[r.KeyID]
	if !ok {
		return fmt.Sprintf("signed by no trusted key (key_id %q)", r.KeyID)
	}
	sig, err := hex.DecodeString(r.Sig)
	prev, perr := decodeHash(r.PrevHash)
	hash, herr := decodeHash(r.Hash)
	if err != nil || perr != nil || herr != nil || !auditsig.VerifyRecord(pub, r.Seq, [32]byte(prev), [32]byte(hash), sig) {
		return "signature does not verify"
	}
	return ""
}

// decodeAuditRecord takes the chain fields out of an audit event; seq, prev_hash,
// hash and body are all required.
func decodeAuditRecord(b []byte) (chainRecord, error) {
	var ev struct {
		Seq      *uint64 `json:"seq"`
		PrevHash *string `json:"prev_hash"`
		Hash     *string `json:"hash"`
		Body     *string `json:"body"`
		KeyID    string  `json:"key_id"`
		Sig      string  `json:"sig"`
		auditFields
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return chainRecord{}, fmt.Errorf("not a JSON object with seq, prev_hash, hash, body: %v", err)
	}
	var missing []string
	if ev.Seq == nil {
		missing = append(missing, "seq")
	}
	if ev.PrevHash == nil {
		missing = append(missing, "prev_hash")
	}
	if ev.Hash == nil {
		missing = append(missing, "hash")
	}
	if ev.Body == nil {
		missing = append(missing, "body")
	}
	if len(missing) > 0 {
		return chainRecord{}, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	r := chainRecord{Seq: *ev.Seq, PrevHash: *ev.PrevHash, Hash: *ev.Hash, Body: *ev.Body, KeyID: ev.KeyID, Sig: ev.Sig}
	var body auditFields
	if err := json.Unmarshal([]byte(*ev.Body), &body); err != nil {
		r.Mismatch = "body (not a JSON object)"
	} else {
		r.Mismatch = ev.auditFields.differs(body)
	}
	return r, nil
}

// auditFields are the fields an audit event repeats from its body; a verifier trusts
// the body (the chain covers it), so a copy must agree with it. Pointers: a field the
// event leaves out is not compared.
type auditFields struct {
	Request     *string  `json:"request"`
	ID          *string  `json:"id"`
	Known       *bool    `json:"known"`
	WasLandmark *bool    `json:"was_landmark"`
	ModelBefore *uint64  `json:"model_before"`
	ModelAfter  *uint64  `json:"model_after"`
	Percentile  *float64 `json:"percentile"`
	PValue      *float64 `json:"p_value"`
}

// differs names the first field set in a (the event) that b (the body) contradicts.
func (a auditFields) differs(b auditFields) string {
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"request", a.Request, b.Request}, {"id", a.ID, b.ID}, {"known", a.Known, b.Known},
		{"was_landmark", a.WasLandmark, b.WasLandmark}, {"model_before", a.ModelBefore, b.ModelBefore},
		{"model_after", a.ModelAfter, b.ModelAfter}, {"percentile", a.Percentile, b.Percentile}, {"p_value", a.PValue, b.PValue},
	} {
		av, bv := reflect.ValueOf(f.a), reflect.ValueOf(f.b)
		if av.IsNil() {
			continue
		}
		if bv.IsNil() || av.Elem().Interface() != bv.Elem().Interface() {
			return f.name
		}
	}
	return ""
}
