package client

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/stream"
)

// ChainReport is the outcome of verifying an audit chain (the JSON of `cairnctl audit
// verify`).
type ChainReport struct {
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
	Forged []ForgedRecord `json:"forged"`
	// Signatures is "verified" when trusted keys were given, else says why they were
	// not checked (NotChecked).
	Signatures string `json:"signatures"`
	// FromCheckpoint is the seq of the signed checkpoint the chain was verified from,
	// null when it was verified from seq 1.
	FromCheckpoint *uint64 `json:"from_checkpoint"`
}

// NotChecked is ChainReport.Signatures when no trusted key was given.
const NotChecked = "not checked: no trusted key"

// ForgedRecord is one record left out of the chain, by where it was read.
type ForgedRecord struct {
	Where  string `json:"where"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// Keys are the audit public keys a verifier trusts, by key id (auditsig.KeyID).
type Keys map[string]ed25519.PublicKey

// ParseKeys parses pinned audit keys: the JSON of GET /audit/key or `cairnctl audit
// key` (one object, or several in a row, for keys rotated out), or bare hex public
// keys separated by white space.
func ParseKeys(b []byte) (Keys, error) {
	keys := Keys{}
	trimmed := strings.TrimSpace(string(b))
	if strings.HasPrefix(trimmed, "{") {
		dec := json.NewDecoder(strings.NewReader(trimmed))
		for dec.More() {
			var k daemon.AuditKey
			if err := dec.Decode(&k); err != nil {
				return nil, fmt.Errorf("not audit key JSON: %v", err)
			}
			if err := keys.add(k.PublicKey); err != nil {
				return nil, err
			}
		}
	} else {
		for _, line := range strings.Fields(trimmed) {
			if err := keys.add(line); err != nil {
				return nil, err
			}
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no public key")
	}
	return keys, nil
}

// ReadKeys reads a pinned key file (ParseKeys).
func ReadKeys(path string) (Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

func (k Keys) add(h string) error {
	pub, err := hex.DecodeString(h)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("public key %.80q: want %d bytes in hex", h, ed25519.PublicKeySize)
	}
	k[auditsig.KeyID(pub)] = pub
	return nil
}

// VerifyAudits reads every retained record of the audit topic (up to its end offsets
// when the call starts) and verifies them (VerifyMessages) with keys (nil: signatures
// not checked). When the first retained record is not seq 1, the chain is anchored at
// the signed checkpoint on the status topic with the smallest seq at or past the last
// removed record, which keys must verify; without one it cannot be anchored (an error).
func (c *Client) VerifyAudits(ctx context.Context, keys Keys) (ChainReport, error) {
	if len(c.cfg.Kafka.Brokers) == 0 {
		return ChainReport{}, ErrNoBrokers
	}
	recs, err := readTopic(ctx, c.cfg.Kafka, c.cfg.Topics.Audits)
	if err != nil {
		return ChainReport{}, err
	}
	cp, err := startCheckpoint(ctx, c.cfg.Kafka, c.cfg.Topics.Status, recs, keys)
	if err != nil {
		return ChainReport{}, err
	}
	rep := VerifyMessages(recs, keys, cp)
	rep.Source = "kafka:" + c.cfg.Topics.Audits
	return rep, nil
}

// startCheckpoint is where the chain must be verified from when retention removed its
// first records (seq 1 is not on the topic); nil when seq 1 is there (startCheckpoint's
// rule is VerifyAudits').
func startCheckpoint(ctx context.Context, kc stream.Config, statusTopic string, recs []stream.Message, keys Keys) (*daemon.Checkpoint, error) {
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
		return nil, fmt.Errorf("the audit topic starts at seq %d (earlier records are gone): a signed checkpoint can anchor it, but only with a trusted key", first)
	}
	msgs, err := readTopic(ctx, kc, statusTopic)
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

// VerifyMessages decodes audit events (in any order, possibly with duplicates) and
// verifies them as one hash chain from the signed checkpoint from (nil: from seq 1 and
// the zero hash). A message that is not an audit event fails verification, naming
// where it was read. With keys (nil: not checked), a record whose signature does not
// verify against the key its key_id names, and with or without them a record whose
// top-level fields disagree with its body, is reported in Forged and left out; OK is
// then false, and the chain is verified over the other records.
func VerifyMessages(msgs []stream.Message, keys Keys, from *daemon.Checkpoint) ChainReport {
	recs := make([]chainRecord, 0, len(msgs))
	var forged []ForgedRecord
	for _, m := range msgs {
		where := fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)
		r, err := decodeAuditRecord(m.Value)
		if err != nil {
			return ChainReport{Reason: fmt.Sprintf("message at %s is not an audit record: %v", where, err), Forged: []ForgedRecord{}}
		}
		r.Where = where
		if why := r.forgery(keys); why != "" {
			forged = append(forged, ForgedRecord{Where: where, Seq: r.Seq, Reason: why})
			continue
		}
		recs = append(recs, r)
	}
	rep := verifyChain(recs, from)
	rep.Forged = append([]ForgedRecord{}, forged...)
	rep.Signatures = "verified"
	if keys == nil {
		rep.Signatures = NotChecked
	}
	if len(forged) > 0 {
		rep.OK = false
		rep.Reason = strings.TrimPrefix(rep.Reason+"; ", "; ") + fmt.Sprintf("%d forged or altered records (first at %s: %s)", len(forged), forged[0].Where, forged[0].Reason)
	}
	return rep
}

// errEnough stops a reader that has read what it wanted.
var errEnough = errors.New("read enough")

// readTopic reads every partition of topic from its earliest retained offset to the
// end offset it has when the call starts.
func readTopic(ctx context.Context, kc stream.Config, topic string) ([]stream.Message, error) {
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
				continue // written after the call started
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
		return nil, fmt.Errorf("reading topic %q: %d of its partitions not read to their end offsets %v in time (read %v messages per partition)", topic, remaining, ends, got)
	}
	return out, nil
}
