package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// chainReport is the output of `cairnctl audit verify`.
type chainReport struct {
	OK bool `json:"ok"`
	// Records is the number of distinct audit records found.
	Records int `json:"records"`
	// Head is the hash of the last record that verified: the chain head when OK, else
	// the hash just before FirstBadSeq ("" when no record verified).
	Head string `json:"head"`
	// FirstBadSeq is the first seq at which the chain fails (null when OK, or when the
	// failure is a message that is not an audit record at all).
	FirstBadSeq *uint64 `json:"first_bad_seq"`
	Reason      string  `json:"reason"`
	// Source is "kafka:<topic>" or "store:<path>".
	Source string `json:"source"`
	// Duplicates counts identical copies of a record dropped (at-least-once delivery
	// re-sends an audit with the same seq and hash after a crash).
	Duplicates int `json:"duplicates"`
	// Forged lists the records left out of the chain: a signature that does not verify
	// against a trusted key (or none), or top-level fields that disagree with the body
	// the chain covers. The chain is verified over the other records.
	Forged []forgedRecord `json:"forged"`
	// Signatures is "verified" when a trusted key was given or fetched, else says why
	// they were not checked.
	Signatures string `json:"signatures"`
	// FromCheckpoint is the seq of the signed checkpoint the chain was verified from
	// (--from-checkpoint), null when it was verified from seq 1.
	FromCheckpoint *uint64 `json:"from_checkpoint"`
}

// forgedRecord is one record left out of the chain, by where it was read.
type forgedRecord struct {
	Where  string `json:"where"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

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
// chain: seqs 1..n without gaps, one record per seq (identical copies are dropped and
// counted, different ones fail), prev_hash of seq 1 the zero hash and of every later
// seq the previous hash, and hash = hex(SHA-256(hex-decoded prev_hash || body)). It
// trusts the body only: the other fields of an audit event repeat what the body says.
func verifyChain(recs []chainRecord) chainReport {
	return verifyChainFrom(recs, nil)
}

// verifyChainFrom is verifyChain of the records after the signed checkpoint cp (nil:
// from seq 1): seqs cp.Seq+1, cp.Seq+2, … without gaps, the first one's prev_hash the
// checkpoint's hash; records at or below cp.Seq (still retained) are left out.
func verifyChainFrom(recs []chainRecord, cp *daemon.Checkpoint) chainReport {
	var rep chainReport
	var base uint64
	prev := make([]byte, sha256.Size)
	if cp != nil {
		h, err := decodeHash(cp.Hash)
		if err != nil {
			return chainReport{Reason: fmt.Sprintf("checkpoint hash: %v", err)}
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
	fail := func(seq uint64, format string, args ...any) chainReport {
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

// auditVerifyCmd is `cairnctl audit verify [--brokers LIST] [--config FILE]
// [--data-dir DIR] [--timeout 60s]`: it walks the deletion audits' hash chain, from
// every partition of cairn.audits (read from the start to the end offsets taken when
// the command starts), or with --data-dir from the daemon's bbolt file DIR/cairn.db
// (storage.Store.VerifyAudit; the daemon must be stopped, since it holds the file
// lock). It prints {"ok","records","head","first_bad_seq","reason","source",
// "duplicates"} and fails when the chain does not verify.
func auditVerifyCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesHTTP|usesConfig)
	dataDir := fs.String("data-dir", "", "verify the daemon's bbolt file DIR/cairn.db instead of the Kafka topic (daemon stopped)")
	keyFile := fs.String("key", "", "trust only the audit public keys in FILE (`cairnctl audit key` output, or hex keys one per line); default: the running daemon's GET /audit/key")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on reading the audit topic")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		var rep chainReport
		if *dataDir != "" {
			var err error
			if rep, err = verifyStore(filepath.Join(*dataDir, "cairn.db")); err != nil {
				return err
			}
		} else {
			keys, err := trustedKeys(ctx, *keyFile, &kf)
			if err != nil {
				return err
			}
			cfg, kc, err := kf.load(fs)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			recs, err := readAuditTopic(ctx, kc, cfg.Kafka.Topics.Audits)
			if err != nil {
				return err
			}
			cp, err := startCheckpoint(ctx, kc, cfg.Kafka.Topics.Status, recs, keys)
			if err != nil {
				return err
			}
			rep = verifyRecordsFrom(recs, keys, cp)
			rep.Source = "kafka:" + cfg.Kafka.Topics.Audits
		}
		if err := writeJSON(stdio.Out, rep); err != nil {
			return err
		}
		if !rep.OK {
			return fmt.Errorf("audit chain does not verify: %s", rep.Reason)
		}
		return nil
	}
}

// startCheckpoint is where the chain must be verified from when retention removed its
// first records (seq 1 is not on the topic): the signed audit_checkpoint on the status
// topic with the smallest seq at or past the last removed record, whose signature a
// trusted key verifies. It is nil when seq 1 is there; an error when it is not and no
// usable checkpoint exists (the chain cannot be anchored).
func startCheckpoint(ctx context.Context, kc stream.Config, statusTopic string, recs []stream.Message, keys auditKeys) (*daemon.Checkpoint, error) {
	first := uint64(math.MaxUint64)
	for _, m := range recs {
		if r, err := decodeAuditRecord(m.Value); err == nil && r.Seq > 0 {
			first = min(first, r.Seq)
		}
	}
	if first <= 1 || first == math.MaxUint64 {
		return nil, nil
	}
	if keys == nil {
		return nil, fmt.Errorf("the audit topic starts at seq %d (earlier records are gone): a signed checkpoint can anchor it, but only with a trusted key (--key FILE or --http)", first)
	}
	msgs, err := readAuditTopic(ctx, kc, statusTopic)
	if err != nil {
		return nil, err
	}
	var best *daemon.Checkpoint
	for _, m := range msgs {
		var st stream.Status
		var cp daemon.Checkpoint
		if json.Unmarshal(m.Value, &st) != nil || st.Kind != "audit_checkpoint" || json.Unmarshal(st.Data, &cp) != nil {
			continue
		}
		h, herr := decodeHash(cp.Hash)
		sig, serr := hex.DecodeString(cp.Sig)
		pub, ok := keys[cp.KeyID]
		if herr != nil || serr != nil || !ok || !auditsig.VerifyCheckpoint(pub, cp.Seq, [32]byte(h), sig) {
			continue // unsigned or forged: never an anchor
		}
		if cp.Seq+1 >= first && (best == nil || cp.Seq < best.Seq) {
			best = &cp
		}
	}
	if best == nil {
		return nil, fmt.Errorf("the audit topic starts at seq %d and no signed checkpoint on %s anchors it", first, statusTopic)
	}
	return best, nil
}

// trustedKeys are the pinned keys of --key, or else the running daemon's (GET
// /audit/key at --http, trusted on first use, with kf's credentials); nil when neither
// is available, and then signatures are not checked (the report says so). Credentials
// that do not load (--token-file, --ca-file, ...) are an error, not "unavailable".
func trustedKeys(ctx context.Context, keyFile string, kf *connFlags) (auditKeys, error) {
	if keyFile != "" {
		return readAuditKeyFile(keyFile)
	}
	d, err := kf.daemon()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	keys, err := fetchAuditKeys(ctx, d)
	if err != nil {
		return nil, nil
	}
	return keys, nil
}

// verifyRecords decodes the audit events and verifies the chain; a message that is
// not an audit event fails verification, naming where it is.
func verifyRecords(msgs []stream.Message, keys auditKeys) chainReport {
	return verifyRecordsFrom(msgs, keys, nil)
}

// verifyRecordsFrom is verifyRecords from the signed checkpoint cp (nil: from seq 1).
func verifyRecordsFrom(msgs []stream.Message, keys auditKeys, cp *daemon.Checkpoint) chainReport {
	recs := make([]chainRecord, 0, len(msgs))
	var forged []forgedRecord
	for _, m := range msgs {
		where := fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)
		r, err := decodeAuditRecord(m.Value)
		if err != nil {
			return chainReport{Reason: fmt.Sprintf("message at %s is not an audit record: %v", where, err), Forged: []forgedRecord{}}
		}
		r.Where = where
		if why := r.forgery(keys); why != "" {
			forged = append(forged, forgedRecord{Where: where, Seq: r.Seq, Reason: why})
			continue
		}
		recs = append(recs, r)
	}
	rep := verifyChainFrom(recs, cp)
	rep.Forged = append([]forgedRecord{}, forged...)
	rep.Signatures = "verified"
	if keys == nil {
		rep.Signatures = "not checked: no trusted key (pass --key FILE, or --http of the running daemon)"
	}
	if len(forged) > 0 {
		rep.OK = false
		rep.Reason = strings.TrimPrefix(rep.Reason+"; ", "; ") + fmt.Sprintf("%d forged or altered records (first at %s: %s)", len(forged), forged[0].Where, forged[0].Reason)
	}
	return rep
}

// forgery says why r is not a genuine record, or "": its top-level fields disagree with
// its body, or (with keys) its signature is missing or does not verify against the key
// its key_id names.
func (r chainRecord) forgery(keys auditKeys) string {
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

// errEnough stops a reader that has read what it wanted.
var errEnough = errors.New("read enough")

// readAuditTopic reads every partition of topic from its earliest retained offset to
// the end offset it has when the call starts.
func readAuditTopic(ctx context.Context, kc stream.Config, topic string) ([]stream.Message, error) {
	ends, err := stream.EndOffsets(ctx, kc, topic)
	if err != nil {
		return nil, fmt.Errorf("reading the end of topic %q (is the broker at %s up?): %w", topic, strings.Join(kc.Brokers, ","), err)
	}
	remaining := 0
	for _, e := range ends {
		if e > 0 {
			remaining++
		}
	}
	if remaining == 0 {
		return nil, nil
	}
	r, err := stream.NewReader(stream.ReaderConfig{
		Kafka:   kc,
		Topics:  []string{topic},
		Start:   func(string, int) (int64, bool, error) { return 0, false, nil }, // earliest
		MaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	var out []stream.Message
	got := map[int]int64{}
	err = r.Run(ctx, func(_ context.Context, batch []stream.Message) error {
		for _, m := range batch {
			end := ends[m.Partition]
			if m.Offset >= end {
				continue // written after the command started
			}
			out = append(out, m)
			if m.Offset == end-1 {
				remaining--
			}
			got[m.Partition]++
		}
		if remaining == 0 {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	if remaining > 0 {
		return nil, fmt.Errorf("reading topic %q: %d of its partitions not read to their end offsets %v before the timeout (read %v messages per partition)", topic, remaining, ends, got)
	}
	return out, nil
}

// openStopped opens the bbolt file at path of a stopped daemon, for the commands that
// read it with --data-dir; instead says what to do while the daemon runs. storage has
// no read-only open: Open takes the file lock (so a running daemon makes it fail after
// the lock timeout) and writes only to migrate an older format.
func openStopped(path, instead string) (*storage.Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--data-dir: %w (want the directory holding the daemon's cairn.db)", err)
	}
	st, err := storage.Open(path, storage.Options{LockTimeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s is locked: is the daemon running on this data directory? Stop it, or %s: %w", path, instead, err)
		}
		return nil, err
	}
	return st, nil
}

// verifyStore verifies the audit chain of the bbolt file at path (openStopped).
func verifyStore(path string) (chainReport, error) {
	rep := chainReport{Source: "store:" + path, Forged: []forgedRecord{},
		Signatures: "not applicable: the store's chain is read from the file (signatures travel with the events on Kafka)"}
	st, err := openStopped(path, "verify through Kafka without --data-dir")
	if err != nil {
		return rep, err
	}
	defer st.Close()
	verr := st.VerifyAudit()
	var brk *storage.AuditBreakError
	switch {
	case verr == nil:
	case errors.As(verr, &brk):
		seq := brk.Seq
		rep.FirstBadSeq = &seq
		rep.Reason = brk.Reason
	default:
		return rep, fmt.Errorf("verifying %s: %w", path, verr)
	}
	err = st.View(func(tx *storage.ReadTx) error {
		n := 0
		cerr := tx.ForEachAudit(1, func(a storage.AuditRecord) error {
			n++
			if rep.FirstBadSeq == nil || a.Seq < *rep.FirstBadSeq {
				rep.Head = hex.EncodeToString(a.Hash[:])
			}
			return nil
		})
		rep.Records = n
		return cerr
	})
	if err != nil && rep.FirstBadSeq == nil {
		return rep, fmt.Errorf("reading the audit records of %s: %w", path, err)
	}
	rep.OK = rep.FirstBadSeq == nil
	return rep, nil
}
