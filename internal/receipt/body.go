package receipt

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/cairn/internal/ingest"
)

// body is an audit record's body, either kind (ingest.AuditBody of a deletion,
// ingest.SubjectAuditBody of a subject's request): the fields a receipt states.
type body struct {
	Kind         string                     `json:"kind"`
	Request      string                     `json:"request"`
	ID           string                     `json:"id"`
	SubjectHash  string                     `json:"subject_hash"`
	Known        bool                       `json:"known"`
	WasLandmark  bool                       `json:"was_landmark"`
	PoolLandmark bool                       `json:"pool_landmark"`
	ModelBefore  uint64                     `json:"model_before"`
	ModelAfter   uint64                     `json:"model_after"`
	ModelAfterID string                     `json:"model_after_id"`
	Points       []ingest.ErasureAuditPoint `json:"points"`
	Part         int                        `json:"part"`
	Parts        int                        `json:"parts"`
	Tombstone    *ingest.Tombstone          `json:"tombstone"`
	Requested    time.Time                  `json:"requested"`
	Applied      time.Time                  `json:"applied"`
	RefitDone    time.Time                  `json:"refit_done"`
	Source       string                     `json:"source"`
}

// describe fills what the request erased from the genuine records' bodies (every
// record's when none is genuine, the problems saying so).
func (r *Receipt) describe(reads []*read) {
	use := slices.DeleteFunc(slices.Clone(reads), func(rd *read) bool { return !rd.rec.OK })
	if len(use) == 0 {
		use = reads
	}
	seen := map[uint64]bool{}
	var points []Point
	for _, rd := range use {
		if seen[rd.rec.Seq] {
			continue
		}
		seen[rd.rec.Seq] = true
		b := rd.body
		r.Kind = cmp.Or(b.Kind, KindDeletion)
		r.SubjectHash, r.Source = b.SubjectHash, b.Source
		r.Requested, r.Applied = b.Requested, b.Applied
		if b.RefitDone.After(r.Completed) {
			r.Completed = b.RefitDone
		}
		r.Erased.ModelBefore, r.Erased.ModelAfter, r.Erased.ModelAfterID = b.ModelBefore, b.ModelAfter, b.ModelAfterID
		switch {
		case r.Kind != KindDeletion:
			for _, p := range b.Points {
				points = append(points, Point{ID: p.ID, WasLandmark: p.WasLandmark, PoolLandmark: p.PoolLandmark, Tombstone: p.Tombstone})
			}
		case b.Known:
			r.PointID = b.ID
			points = append(points, Point{ID: b.ID, WasLandmark: b.WasLandmark, PoolLandmark: b.PoolLandmark, Tombstone: b.Tombstone})
		default:
			r.PointID = b.ID
		}
	}
	slices.SortFunc(points, func(a, b Point) int { return cmp.Compare(a.ID, b.ID) })
	r.Erased.Points = slices.CompactFunc(points, func(a, b Point) bool { return a.ID == b.ID })
	if r.Erased.Points == nil {
		r.Erased.Points = []Point{}
	}
	r.Erased.Topics = tombstones(r.Erased.Points)
	for _, p := range r.Erased.Points {
		if p.WasLandmark {
			r.Erased.Landmarks++
		}
	}
	r.Erased.Store, r.Erased.Slots = r.where()
}

// where says what left the state file and the slot files.
func (r *Receipt) where() (store, slots string) {
	n := len(r.Erased.Points)
	switch {
	case r.Kind == KindUnblock:
		return "the subject's block was lifted: its later upserts are stored again; nothing was erased", "nothing was erased"
	case n == 0 && r.Kind == KindErasure:
		return "nothing was stored about the subject; its later upserts are refused until an unblock", "nothing was stored"
	case n == 0:
		return fmt.Sprintf("nothing was stored under the id %q", r.PointID), "nothing was stored"
	}
	what := fmt.Sprintf("%d points about the subject", n)
	if r.Kind == KindDeletion {
		what = fmt.Sprintf("the point %q", r.PointID)
	}
	store = what + " removed from the state file, with their pool records and subject index entries, " +
		"in the transaction that applied the request"
	if r.Kind == KindErasure {
		store += "; the subject is blocked: its later upserts are refused until an unblock"
	}
	slots = fmt.Sprintf("the raw inputs of %s zeroed and synced in their slot files after that transaction committed, "+
		"before any later output was published", what)
	return store, slots
}

// tombstones groups the points' tombstones by topic and partition, offsets sorted.
func tombstones(points []Point) []Tombstones {
	type tp struct {
		topic string
		part  int
	}
	by := map[tp]*Tombstones{}
	var order []tp
	for _, p := range points {
		t := p.Tombstone
		if t == nil {
			continue
		}
		k := tp{t.Topic, t.Partition}
		g := by[k]
		if g == nil {
			g = &Tombstones{Topic: t.Topic, Partition: t.Partition, Policy: t.Policy, Offsets: []int64{}}
			by[k] = g
			order = append(order, k)
		}
		if t.Unknown != "" || t.Offset < 0 {
			g.Unknown++
		} else {
			g.Offsets = append(g.Offsets, t.Offset)
		}
	}
	slices.SortFunc(order, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part)) })
	out := make([]Tombstones, 0, len(order))
	for _, k := range order {
		g := by[k]
		slices.Sort(g.Offsets)
		out = append(out, *g)
	}
	return out
}
