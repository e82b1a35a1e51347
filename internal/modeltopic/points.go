package modeltopic

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/modelbus"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// pointsEvery is how often the publisher looks for gradient rows of points stored
// since the last version (the ingest extends the serving rows without a kick).
const pointsEvery = 500 * time.Millisecond

// pointsState is what the leader last put on the topic of the gradient rankings'
// points, to tell when the serving rows changed: the rows and their unmasked count;
// warned once inputs too large for a record were met (none are then published).
type pointsState struct {
	grad   *serving.GradRows
	active int
	known  bool
	warned bool
}

// changed says whether s's gradient rows differ from those last published.
func (st *pointsState) changed(s *serving.Model) bool {
	n, _ := s.GradientRows()
	return !st.known || st.grad != s.Grad || st.active != n
}

// publishPoints puts the points of s's unmasked gradient rows on the topic (package
// doc, "Points"): a record for each point not live at its version, tombstones for the
// live point keys s no longer holds (a deletion, a label change, rows dropped over
// their budget), and the class count when it changed; live (key → value version, or
// class count) is updated. With points gone a compaction is due: the next version's
// publication runs it (a deletion always brings a refit), as for the landmarks' rows.
// Nothing is written while s holds no rows for want of labels or budget and none are
// live.
func (p *Publisher) publishPoints(ctx context.Context, w *stream.Writer, s *serving.Model, live map[string]uint64, st *pointsState) error {
	topic := p.cfg.Topic
	n, _ := s.GradientRows()
	var msgs []stream.Message
	vers := map[string]uint64{} // the live versions the writes set (a tombstone: absent)
	pts := s.GradPoints()
	want := make(map[string]bool, len(pts))
	for _, pt := range pts {
		key := string(modelbus.PointKey(pt.ID))
		want[key] = true
		if v, ok := live[key]; ok && v == uint64(pt.Version) {
			continue
		}
		m, ok := modelbus.PointMessage(modelbus.Point{ID: pt.ID, Version: pt.Version, Label: pt.Label, X: pt.X})
		if !ok { // every input has the backbone's length: none fits
			if !st.warned {
				p.cfg.Log.Warn().Int("input_values", len(pt.X)).Int("record_bytes", modelbus.MaxChunk).
					Msg("models topic: inputs too large for a point record; replicas will not serve the gradient rankings")
			}
			*st = pointsState{grad: s.Grad, active: n, known: true, warned: true}
			return nil
		}
		msgs, vers[key] = append(msgs, stream.Message{Topic: topic, Key: m.Key, Value: m.Value}), uint64(pt.Version)
	}
	if s.Grad != nil {
		if c := uint64(s.Grad.Classes()); live[modelbus.ClassesKey] != c {
			m := modelbus.ClassesMessage(int(c))
			msgs, vers[modelbus.ClassesKey] = append(msgs, stream.Message{Topic: topic, Key: m.Key, Value: m.Value}), c
		}
	}
	gone := 0
	for k := range live {
		if strings.HasPrefix(k, "p/") && !want[k] || k == modelbus.ClassesKey && s.Grad == nil {
			msgs = append(msgs, stream.Message{Topic: topic, Key: []byte(k)})
			gone++
		}
	}
	if len(msgs) == 0 {
		*st = pointsState{grad: s.Grad, active: n, known: true}
		return nil
	}
	if err := w.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("points of model %d: %w", s.Version, err)
	}
	for _, m := range msgs {
		if v, ok := vers[string(m.Key)]; ok {
			live[string(m.Key)] = v
		} else {
			delete(live, string(m.Key))
		}
	}
	*st = pointsState{grad: s.Grad, active: n, known: true}
	if gone > 0 {
		p.eraseDue.Store(true)
	}
	p.cfg.Log.Debug().Uint64("model", s.Version).Int("records", len(msgs)-gone).Int("tombstones", gone).Msg("points published on the models topic")
	return nil
}
