package receipt

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/storage"
	"github.com/cairnhq/cairn/stream"
)

// State judges audit records against the authority of their chain, as cairnd does: the
// state file that holds the chain (Store) and the audit key that signs it (Signer, the
// key its operators pin). Both are only read.
type State struct {
	Store  *storage.Store
	Signer *auditsig.Signer
}

// Chain is the chain of the state file as the audit topic's receipt states it: the
// file's chain verified (storage.Store.VerifyAudit; a failure is its Reason, not an
// error) and its head. topic names the audit topic.
func (s State) Chain(topic string) (Chain, error) {
	chain := Chain{Source: "cairnd: the audit topic " + topic + " against the state file",
		Signatures: "against the daemon's audit key " + s.Signer.KeyID(), OK: true}
	if verr := s.Store.VerifyAudit(); verr != nil {
		chain.OK, chain.Reason = false, verr.Error()
	}
	err := s.Store.View(func(tx *storage.ReadTx) error {
		head, ok, err := tx.AuditHead()
		if ok {
			chain.Records, chain.Head = int(head.Seq), hex.EncodeToString(head.Hash[:])
		}
		return err
	})
	return chain, err
}

// Verdict is the verdict on one audit record a read from the topic as m (Input.Verdict):
// the state file's record at its seq must be the same, and its signature must verify
// under the key.
func (s State) Verdict(m stream.Message, a stream.Audit) Verdict {
	v := Verdict{Signature: "verified"}
	var problems []string
	prev, perr := hex.DecodeString(a.PrevHash)
	hash, herr := hex.DecodeString(a.Hash)
	sig, serr := hex.DecodeString(a.Sig)
	switch {
	case perr != nil || herr != nil || len(prev) != 32 || len(hash) != 32:
		v.Signature = "not checked: malformed hashes"
		problems = append(problems, "its prev_hash or hash is not 64 hex digits")
	case a.KeyID != s.Signer.KeyID() || serr != nil ||
		!auditsig.VerifyRecord(s.Signer.PublicKey(), a.Seq, [32]byte(prev), [32]byte(hash), sig):
		v.Signature = "does not verify"
		problems = append(problems, fmt.Sprintf("its signature (key %q) does not verify under the daemon's audit key %s", a.KeyID, s.Signer.KeyID()))
	}
	var stored storage.AuditRecord
	found := false
	err := s.Store.View(func(tx *storage.ReadTx) error {
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

// Reverify are the commands a receipt's reader runs to check it without the daemon's
// word (Input.Reverify): pin the key (served at httpAddr), verify the chain, make the
// receipt of request again from brokers.
func Reverify(httpAddr string, brokers []string, request string) []string {
	b := strings.Join(brokers, ",")
	return []string{
		fmt.Sprintf("cairnctl audit key --http %s > audit-key.json", httpAddr),
		fmt.Sprintf("cairnctl audit verify --brokers %s --key audit-key.json", b),
		fmt.Sprintf("cairnctl audit receipt --request %s --brokers %s --key audit-key.json --format html > receipt.html", request, b),
	}
}
