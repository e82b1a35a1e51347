package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/internal/receipt"
	"github.com/cairnhq/cairn/stream"
)

// Receipt is the erasure receipt of a deletion or a data subject's erasure: what was
// requested and applied, and when, what was erased where, and each audit record of the
// request with its verdict (docs/operations.md "Erasure receipts" shows one). Its JSON is
// what cairnctl audit receipt --format json prints.
type Receipt = receipt.Receipt

// Receipt is the erasure receipt of request, checked the way
// VerifyAudits checks the chain: every retained record of the audit topic is read and
// verified with keys, and each record of the request is judged by that verification (a
// record left out as forged carries its reason; a record at or past the chain's first
// bad seq is not in the verified chain). Without keys signatures are not checked and
// the receipt does not verify. reverify are the commands the receipt tells its reader
// to run (its Reverify). An error matching ErrNoReceipt: no record of the topic answers
// request.
func (c *Client) Receipt(ctx context.Context, request string, keys Keys, reverify []string) (*Receipt, error) {
	if len(c.cfg.Kafka.Brokers) == 0 {
		return nil, ErrNoBrokers
	}
	recs, err := readTopic(ctx, c.cfg.Kafka, c.cfg.Topics.Audits)
	if err != nil {
		return nil, err
	}
	cp, err := startCheckpoint(ctx, c.cfg.Kafka, c.cfg.Topics.Status, recs, keys)
	if err != nil {
		return nil, err
	}
	rep := VerifyMessages(recs, keys, cp)
	rep.Source = "kafka:" + c.cfg.Topics.Audits
	forged := map[string]string{}
	for _, f := range rep.Forged {
		forged[f.Where] = f.Reason
	}
	verdict := func(m stream.Message, a stream.Audit) receipt.Verdict {
		v := receipt.Verdict{Signature: rep.Signatures}
		if keys == nil {
			v.Problem = "its signature was not checked: no pinned key (pass --key FILE)"
		}
		if why, ok := forged[fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset)]; ok {
			v.Signature, v.Problem = "refused", why
			return v
		}
		v.InChain = rep.FirstBadSeq == nil || a.Seq < *rep.FirstBadSeq
		if !v.InChain && v.Problem == "" {
			v.Problem = fmt.Sprintf("the chain does not verify from seq %d on: %s", *rep.FirstBadSeq, rep.Reason)
		}
		return v
	}
	checked := "signatures not checked (no pinned key)"
	if keys != nil {
		checked = "signatures against the pinned key " + strings.Join(slices.Sorted(maps.Keys(keys)), ", ")
	}
	return receipt.Build(receipt.Input{Request: request, Messages: recs, Verdict: verdict, Reverify: reverify,
		Chain:     receipt.Chain{Source: rep.Source, Records: rep.Records, Head: rep.Head, OK: rep.OK, Reason: rep.Reason, Signatures: rep.Signatures},
		CheckedBy: fmt.Sprintf("cairnctl audit receipt: every record of the audit topic %s (%d), %s", c.cfg.Topics.Audits, len(recs), checked)})
}
