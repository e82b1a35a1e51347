package replica

import (
	"cmp"
	"slices"
	"sync"

	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
)

// Points is a replica's copy of the primary's gradient points: the labelled stored
// points whose gradient rows the primary ranks, read from the models topic's point
// records (internal/modelbus, "Points"), and the class count of those rows. From them
// it builds the same rows (a row is a function of the backbone, the input and the
// label alone), so a replica answers the gradient rankings as the primary does. It is
// safe for concurrent use.
type Points struct {
	Backbone entk.Backbone
	Budget   int64 // query.gradient_memory_bytes

	mu      sync.Mutex
	pts     map[string]held
	seq     uint64
	classes int
	last    *serving.GradRows   // the rows last built: their rows are reused by the next build
	masked  map[string]maskedAt // the ids of the masks last split (Masks)
}

// maskedAt is the value version a mask's id had when the mask was first split, if a
// point of the id was held then.
type maskedAt struct {
	version int64
	held    bool
}

// held is one point and the order it arrived in (the primary publishes its rows in
// row order, so the replica's rows keep the primary's order).
type held struct {
	p   serving.GradPoint
	seq uint64
}

// Install gives in the gradient rows of the points held (a version read from the
// models topic), or none and why.
func (p *Points) Install(in *serving.Input) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	in.Grad, in.GradErr = p.rows()
}

// rows builds the rows of every point held, in arrival order, with the primary's class
// count. p.mu is held.
func (p *Points) rows() (*serving.GradRows, error) {
	hs := make([]held, 0, len(p.pts))
	for _, h := range p.pts {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b held) int { return cmp.Compare(a.seq, b.seq) })
	pts := make([]serving.GradPoint, len(hs))
	for i, h := range hs {
		pts[i] = h.p
	}
	g, err := serving.NewGradRows(p.Backbone, pts, p.Budget, p.last)
	if g != nil {
		g = g.WithClasses(p.classes)
		p.last = g
	}
	return g, err
}

// Apply takes a run of point records (a tombstone: X nil) and a class count (0: none)
// and returns s with them: rows appended for the new points and new versions
// (serving.Model.WithGradPoints), the rows of the points gone masked, the class count
// raised to the primary's; or, when s holds no rows, every row built. s nil: the
// records are only kept (the first version installs them).
func (p *Points) Apply(s *serving.Model, recs []modelbus.Point, classes int) *serving.Model {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pts == nil {
		p.pts = map[string]held{}
	}
	touched := make([]string, 0, len(recs))
	for _, r := range recs {
		touched = append(touched, r.ID)
		if r.X == nil {
			delete(p.pts, r.ID)
			continue
		}
		p.seq++
		p.pts[r.ID] = held{p: serving.GradPoint{ID: r.ID, Version: r.Version, X: r.X, Label: r.Label}, seq: p.seq}
	}
	if classes > 0 {
		p.classes = classes
	}
	switch {
	case s == nil:
		return nil
	case s.Grad == nil:
		return s.WithGrad(p.rows())
	}
	slices.Sort(touched)
	var add []serving.GradPoint
	var gone []string
	for _, id := range slices.Compact(touched) {
		if h, ok := p.pts[id]; ok {
			add = append(add, h.p)
		} else {
			gone = append(gone, id)
		}
	}
	slices.SortFunc(add, func(a, b serving.GradPoint) int { return cmp.Compare(p.pts[a.ID].seq, p.pts[b.ID].seq) })
	ns := s.WithGradMask(gone).WithGradPoints(add, p.Budget)
	if ns.Grad != nil {
		ns = ns.WithGradClasses(p.classes)
		p.last = ns.Grad
	}
	return ns
}

// Mask is s with the models topic's masked ids ids applied as the primary applied
// them (Masks): WithMask for those whose rows go, WithLandmarkMask for the others.
func (p *Points) Mask(s *serving.Model, ids []string) *serving.Model {
	both, landmarks := p.Masks(ids)
	return s.WithMask(both).WithLandmarkMask(landmarks)
}

// Masks splits ids, the landmarks the primary has masked in the serving model (the
// models topic's masks that apply to it), into those whose gradient rows are masked too
// and those whose landmark terms alone are. On the primary a deletion masks the row of
// the value the point had then, and a value stored again under the id later gets a row
// of its own; a mask names ids only. So the first time Masks sees an id it notes the
// value version held then, and an id whose point has another version since keeps its
// row (landmarks). An id of which no point was held then masks every row of the id.
// Ids that no longer come are forgotten. With p nil every id masks both.
func (p *Points) Masks(ids []string) (both, landmarks []string) {
	if p == nil {
		return ids, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]maskedAt, len(ids))
	for _, id := range ids {
		h, held := p.pts[id]
		at, ok := p.masked[id]
		if !ok {
			at = maskedAt{version: h.p.Version, held: held}
		}
		seen[id] = at
		if held && at.held && h.p.Version != at.version {
			landmarks = append(landmarks, id)
		} else {
			both = append(both, id)
		}
	}
	p.masked = seen
	return both, landmarks
}
