package daemon

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/receipt"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// receiptTimeout bounds the read of the audit topic for one receipt page.
const receiptTimeout = 30 * time.Second

// Receipt implements ui.Receipts: the erasure receipt of request (package receipt) as
// the daemon checks it. It reads the audit topic (stream.ReadAll; the whole topic, so
// a page costs a read of every audit) and judges each record of the request against its
// own state, the authority of the chain: the record must be the one the state file
// holds at its seq (same prev_hash, hash and body, and that file's chain verifies,
// storage.Store.VerifyAudit) and its signature must verify under the daemon's own audit
// key, the key its operators pin. A record on the topic that anyone altered or added
// differs from the state and is flagged, as cairnctl audit verify flags it. Only a
// daemon with a state file makes receipts (a replica has none).
func (s uiSource) Receipt(ctx context.Context, request string) (*receipt.Receipt, error) {
	d := s.d
	if d.store == nil || d.signer == nil {
		return nil, fmt.Errorf("a %s keeps no audit chain: ask the primary, or cairnctl audit receipt", d.cfg.Role)
	}
	ctx, cancel := context.WithTimeout(ctx, receiptTimeout)
	defer cancel()
	msgs, err := stream.ReadAll(ctx, d.kafka, d.cfg.Kafka.Topics.Audits)
	if err != nil {
		return nil, err
	}
	chain := receipt.Chain{Source: "cairnd: the audit topic " + d.cfg.Kafka.Topics.Audits + " against the state file",
		Signatures: "against the daemon's audit key " + d.signer.KeyID(), OK: true}
	if verr := d.store.VerifyAudit(); verr != nil {
		chain.OK, chain.Reason = false, verr.Error()
	}
	err = d.store.View(func(tx *storage.ReadTx) error {
		head, ok, err := tx.AuditHead()
		if ok {
			chain.Records, chain.Head = int(head.Seq), hex.EncodeToString(head.Hash[:])
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return receipt.Build(receipt.Input{Request: request, Messages: msgs, Verdict: d.judgeAudit, Chain: chain,
		CheckedBy: "cairnd, at " + time.Now().UTC().Format(time.RFC3339) + ": the records on the audit topic against its state file and its own audit key " + d.signer.KeyID(),
		Reverify:  d.reverify(request)})
}

// judgeAudit is the receipt's verdict on one audit record a read from the topic as m:
// the state file's record at its seq must be the same, and its signature must verify
// under the daemon's key.
func (d *Daemon) judgeAudit(m stream.Message, a stream.Audit) receipt.Verdict {
	v := receipt.Verdict{Signature: "verified"}
	var problems []string
	prev, perr := hex.DecodeString(a.PrevHash)
	hash, herr := hex.DecodeString(a.Hash)
	sig, serr := hex.DecodeString(a.Sig)
	switch {
	case perr != nil || herr != nil || len(prev) != 32 || len(hash) != 32:
		v.Signature = "not checked: malformed hashes"
		problems = append(problems, "its prev_hash or hash is not 64 hex digits")
	case a.KeyID != d.signer.KeyID() || serr != nil ||
		!auditsig.VerifyRecord(d.signer.PublicKey(), a.Seq, [32]byte(prev), [32]byte(hash), sig):
		v.Signature = "does not verify"
		problems = append(problems, fmt.Sprintf("its signature (key %q) does not verify under the daemon's audit key %s", a.KeyID, d.signer.KeyID()))
	}
	var stored storage.AuditRecord
	found := false
	err := d.store.View(func(tx *storage.ReadTx) error {
		var err error
		stored, found, err = tx.Audit(a.Seq)
		return err
	})
	switch {
	case err != nil:
		problems = append(problems, "the state file's record cannot be read: "+err.Error())
	case !found:
		problems = append(problems, fmt.Sprintf("the state file has no record with seq %d", a.Seq))
	case hex.EncodeToString(stored.Hash[:]) != a.Hash || hex.EncodeToString(stored.PrevHash[:]) != a.PrevHash ||
		!bytes.Equal(stored.Body, []byte(a.Body)):
		problems = append(problems, fmt.Sprintf("it differs from the record the state file holds at seq %d (hash %x)", a.Seq, stored.Hash[:8]))
	default:
		v.InChain = true
	}
	v.Problem = strings.Join(problems, "; ")
	return v
}

// reverify are the commands a receipt's reader runs to check it without the daemon's
// word: pin the key, verify the chain, make the receipt again.
func (d *Daemon) reverify(request string) []string {
	brokers := strings.Join(d.kafka.Brokers, ",")
	return []string{
		fmt.Sprintf("cairnctl audit key --http %s > audit-key.json", d.httpAddr),
		fmt.Sprintf("cairnctl audit verify --brokers %s --key audit-key.json", brokers),
		fmt.Sprintf("cairnctl audit receipt --request %s --brokers %s --key audit-key.json --format html > receipt.html", request, brokers),
	}
}
