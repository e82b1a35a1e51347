package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/receipt"
	"github.com/cairnhq/cairn/stream"
)

// receiptTimeout bounds the read of the audit topic for one receipt page.
const receiptTimeout = 30 * time.Second

// Receipt implements ui.Receipts: the erasure receipt of request (package receipt) as
// the daemon checks it. It reads the audit topic (stream.ReadAll; the whole topic, so
// a page costs a read of every audit) and judges each record of the request against its
// own state (receipt.State), the authority of the chain: the record must be the one the state file
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
	st := receipt.State{Store: d.store, Signer: d.signer}
	chain, err := st.Chain(d.cfg.Kafka.Topics.Audits)
	if err != nil {
		return nil, err
	}
	return receipt.Build(receipt.Input{Request: request, Messages: msgs, Verdict: st.Verdict, Chain: chain,
		CheckedBy: "cairnd, at " + time.Now().UTC().Format(time.RFC3339) + ": the records on the audit topic against its state file and its own audit key " + d.signer.KeyID(),
		Reverify:  receipt.Reverify(d.httpAddr, d.kafka.Brokers, request)})
}
