package receipt

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// ErrNotFound: no audit record of the request was read (not audited yet, or no such
// request).
var ErrNotFound = errors.New("receipt: no audit record of the request")

// Kinds of request a receipt is about.
const (
	KindErasure  = ingest.KindErasure // a data subject's points
	KindUnblock  = ingest.KindUnblock // a subject's later upserts allowed again
	KindDeletion = "deletion"         // one point, by id
)

// Receipt is the erasure receipt of one request (the JSON of `cairnctl audit receipt
// --format json`).
type Receipt struct {
	Request string `json:"request"`
	Kind    string `json:"kind"`
	// SubjectHash is the data subject's keyed hash (an erasure or unblock); PointID the
	// deleted point's id (a deletion).
	SubjectHash string `json:"subject_hash,omitempty"`
	PointID     string `json:"point_id,omitempty"`
	// Requested is the request's Kafka timestamp, Applied when cairnd applied it (its
	// points left the store), Completed when the refit that audited it finished (the
	// points left the model); Source is the request's coordinates, topic/partition/offset.
	Requested time.Time `json:"requested"`
	Applied   time.Time `json:"applied"`
	Completed time.Time `json:"completed"`
	Source    string    `json:"source"`
	Erased    Erased    `json:"erased"`
	// Records are the request's audit records as read, by seq (an altered copy next to
	// the genuine one).
	Records []Record `json:"records"`
	Chain   Chain    `json:"chain"`
	// Verified: every record genuine and in the verified chain (package doc).
	Verified bool     `json:"verified"`
	Problems []string `json:"problems"`
	// CheckedBy says who verified and against what; Reverify are the commands that
	// check it again.
	CheckedBy string   `json:"checked_by"`
	Reverify  []string `json:"reverify"`
}

// Erased is what the request erased and from where.
type Erased struct {
	// Points are the points removed, in id order (none for an unknown id or an
	// unblock).
	Points []Point `json:"points"`
	// Store and Slots say what left the state file and the slot files.
	Store string `json:"store"`
	Slots string `json:"slots"`
	// Topics are the tombstones on the broker, by topic and partition.
	Topics []Tombstones `json:"topics"`
	// ModelBefore served when the request was applied; ModelAfter (ModelAfterID) is
	// the first model without the points (0: no model, too few points were left).
	ModelBefore  uint64 `json:"model_before"`
	ModelAfter   uint64 `json:"model_after"`
	ModelAfterID string `json:"model_after_id,omitempty"`
	// Landmarks counts the points that were landmarks of the serving model, masked
	// from its answers at once.
	Landmarks int `json:"landmarks"`
}

// Point is one erased point.
type Point struct {
	ID           string            `json:"id"`
	WasLandmark  bool              `json:"was_landmark"`
	PoolLandmark bool              `json:"pool_landmark"`
	Tombstone    *ingest.Tombstone `json:"tombstone"`
}

// Tombstones are the tombstones of the erased points on one partition of one topic,
// with the topic's cleanup policy ("compact": the broker drops the points' records at
// its next compaction). Unknown counts points whose tombstone position the audit could
// not state (ingest.Tombstone.Unknown).
type Tombstones struct {
	Topic     string  `json:"topic"`
	Partition int     `json:"partition"`
	Offsets   []int64 `json:"offsets"`
	Policy    string  `json:"policy"`
	Unknown   int     `json:"unknown,omitempty"`
}

// Record is one audit record of the request as read, and what was found about it.
type Record struct {
	Seq      uint64 `json:"seq"`
	Part     int    `json:"part,omitempty"`
	Parts    int    `json:"parts,omitempty"`
	Hash     string `json:"hash"`
	PrevHash string `json:"prev_hash"`
	KeyID    string `json:"key_id"`
	// Where is where it was read (topic/partition@offset); Copies how many identical
	// copies were read (a re-send after a crash writes one again).
	Where  string `json:"where"`
	Copies int    `json:"copies"`
	// HashOK: hash is SHA-256 of prev_hash and body. Signature and InChain are the
	// verifier's (Verdict).
	HashOK    bool   `json:"hash_ok"`
	Signature string `json:"signature"`
	InChain   bool   `json:"in_chain"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
}

// Chain is what the verifier found about the whole audit chain.
type Chain struct {
	// Source is what was verified ("kafka:cairn.audits", "cairnd state file").
	Source string `json:"source"`
	// Records is the number of records in the chain, Head its last hash.
	Records int    `json:"records"`
	Head    string `json:"head"`
	OK      bool   `json:"ok"`
	Reason  string `json:"reason,omitempty"`
	// Signatures says against which key signatures were checked, or why not.
	Signatures string `json:"signatures"`
}

// Verdict is what a verifier found about one audit record of the request.
type Verdict struct {
	// Signature is "verified" (against the pinned key), or says why not.
	Signature string
	// InChain: the record is the one at its seq in the chain the verifier verified.
	InChain bool
	// Problem is why the record is not genuine ("" when it is).
	Problem string
}

// Input is what Build makes a receipt from.
type Input struct {
	Request string
	// Messages are audit topic records: those keyed by Request are used, the others
	// ignored.
	Messages []stream.Message
	// Verdict judges one record of the request (the message and its event).
	Verdict func(stream.Message, stream.Audit) Verdict
	Chain   Chain
	// CheckedBy and Reverify are copied into the receipt.
	CheckedBy string
	Reverify  []string
}

// read is one distinct audit record of the request: the message, its event and body.
type read struct {
	msg  stream.Message
	ev   stream.Audit
	body body
	rec  Record
}

// Build makes the receipt of in.Request, or ErrNotFound.
func Build(in Input) (*Receipt, error) {
	reads, err := distinct(in)
	if err != nil {
		return nil, err
	}
	r := &Receipt{Request: in.Request, Chain: in.Chain, CheckedBy: in.CheckedBy, Reverify: slices.Clone(in.Reverify),
		Problems: []string{}, Records: []Record{}}
	bySeq := map[uint64]int{}
	for _, rd := range reads {
		r.Records = append(r.Records, rd.rec)
		bySeq[rd.rec.Seq]++
		if rd.rec.Problem != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("record seq %d at %s: %s", rd.rec.Seq, rd.rec.Where, rd.rec.Problem))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(bySeq)) {
		if bySeq[s] > 1 {
			r.Problems = append(r.Problems, fmt.Sprintf("the topic holds %d different records with seq %d for this request", bySeq[s], s))
		}
	}
	if !in.Chain.OK {
		r.Problems = append(r.Problems, "the audit chain does not verify: "+cmp.Or(in.Chain.Reason, "no reason given"))
	}
	r.describe(reads)
	r.Verified = len(r.Problems) == 0
	return r, nil
}

// distinct decodes the request's records, drops identical copies (counted) and judges
// each, sorted by seq and then by where they were read.
func distinct(in Input) ([]*read, error) {
	var out []*read
	for _, m := range in.Messages {
		if string(m.Key) != in.Request {
			continue
		}
		var ev stream.Audit
		if json.Unmarshal(m.Value, &ev) != nil || ev.Request != in.Request {
			continue
		}
		if i := slices.IndexFunc(out, func(r *read) bool { return bytes.Equal(r.msg.Value, m.Value) }); i >= 0 {
			out[i].rec.Copies++
			continue
		}
		rd := &read{msg: m, ev: ev}
		rd.rec = Record{Seq: ev.Seq, Hash: ev.Hash, PrevHash: ev.PrevHash, KeyID: ev.KeyID, Copies: 1,
			Where: fmt.Sprintf("%s/%d@%d", m.Topic, m.Partition, m.Offset), HashOK: HashOK(ev.PrevHash, ev.Hash, ev.Body)}
		var probs []string
		if !rd.rec.HashOK {
			probs = append(probs, "its hash is not SHA-256 of its prev_hash and body: the record was altered")
		}
		if err := json.Unmarshal([]byte(ev.Body), &rd.body); err != nil {
			probs = append(probs, "its body is not an audit record: "+err.Error())
		} else if rd.body.Request != in.Request {
			probs = append(probs, fmt.Sprintf("its body names request %q", rd.body.Request))
		}
		rd.rec.Part, rd.rec.Parts = rd.body.Part, rd.body.Parts
		v := in.Verdict(m, ev)
		rd.rec.Signature, rd.rec.InChain = v.Signature, v.InChain
		if v.Problem != "" {
			probs = append(probs, v.Problem)
		}
		if !v.InChain && v.Problem == "" {
			probs = append(probs, "it is not the record at its seq in the verified chain")
		}
		rd.rec.Problem = strings.Join(probs, "; ")
		rd.rec.OK = rd.rec.Problem == ""
		out = append(out, rd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q", ErrNotFound, in.Request)
	}
	slices.SortStableFunc(out, func(a, b *read) int {
		return cmp.Or(cmp.Compare(a.rec.Seq, b.rec.Seq), cmp.Compare(a.rec.Where, b.rec.Where))
	})
	return out, nil
}

// HashOK says whether hashHex is the hex SHA-256 of the hex-decoded prevHex followed by
// body (the chain's rule, storage FORMAT.md "Audit hash chain").
func HashOK(prevHex, hashHex, body string) bool {
	prev, err := hex.DecodeString(prevHex)
	if err != nil || len(prev) != sha256.Size {
		return false
	}
	h := sha256.New()
	h.Write(prev)
	h.Write([]byte(body))
	return hex.EncodeToString(h.Sum(nil)) == hashHex
}
