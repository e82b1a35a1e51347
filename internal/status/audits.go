package status

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/storage"
)

// UIAudits is the stored audit chain as the UI shows it (ui.Source.Audits): each record
// checked against its predecessor (prev_hash) and the chain as a whole
// (storage.Store.VerifyAudit). The store keeps no signatures (the publisher signs,
// deterministically), so a record's signature is recomputed under signer (nil: none)
// and verified: this says which key signs it and that the key works, not what is on
// the topic (cairnctl audit verify checks that).
func UIAudits(store *storage.Store, signer *auditsig.Signer) ([]ui.Audit, error) {
	chainErr := store.VerifyAudit()
	var out []ui.Audit
	var prev [32]byte
	err := store.View(func(tx *storage.ReadTx) error {
		return tx.ForEachAudit(1, func(r storage.AuditRecord) error {
			var b ingest.AuditBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				return fmt.Errorf("audit %d: %w", r.Seq, err)
			}
			a := ui.Audit{Seq: r.Seq, Hash: hex.EncodeToString(r.Hash[:]), PrevHash: hex.EncodeToString(r.PrevHash[:]),
				ChainOK: chainErr == nil && r.PrevHash == prev, Request: b.Request, ID: b.ID, Known: b.Known,
				WasLandmark: b.WasLandmark, ModelBefore: b.ModelBefore, ModelAfter: b.ModelAfter,
				Percentile: b.Percentile, PValue: b.PValue, Requested: b.Requested, RefitDone: b.RefitDone}
			if signer != nil {
				a.KeyID = signer.KeyID()
				a.SignatureOK = auditsig.VerifyRecord(signer.PublicKey(), r.Seq, r.PrevHash, r.Hash,
					signer.SignRecord(r.Seq, r.PrevHash, r.Hash))
			}
			prev = r.Hash
			out = append(out, a)
			return nil
		})
	})
	return out, err
}
