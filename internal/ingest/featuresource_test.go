package ingest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/internal/pipeline"
	"github.com/cairnhq/cairn/stream"
)

// mapSource is a FeatureSource of fixed records, filed by their training event, and
// messages to refuse.
type mapSource struct {
	recs    map[[2]int64][]stream.Message
	refused []stream.Message
	lookups int
}

func (s *mapSource) Lookup(_ context.Context, _ time.Duration, want []FeatureRequest, got [][]stream.Message) []stream.Message {
	s.lookups++
	for i, w := range want {
		got[i] = s.recs[[2]int64{int64(w.Partition), w.Offset}]
	}
	r := s.refused
	s.refused = nil
	return r
}

// TestFeatureSourceRecords: with a feature source, the state is the bits of the
// primary's own features whether a record is valid (taken), repeated, or invalid in
// any field (refused: dead-lettered as feature_mismatch and computed here); and a
// record's features are really used (a record with other features, valid in every
// field the primary checks, changes the state: the test can fail).
func TestFeatureSourceRecords(t *testing.T) {
	cfg := testConfig()
	feat, err := pipeline.NewFeatures(cfg.Model, cfg.Sketch, "")
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(t, 3, feat.InputDim())
	var evs []event
	for i := range 40 {
		evs = append(evs, g.upsert(id(i)))
	}
	evs = append(evs, g.del(id(3)), g.upsert(id(3)))
	ms := msgs(cfg.Kafka.Topics.Train, evs)
	for i := range ms {
		ms[i].Partition, ms[i].Offset = i%2, int64(i)
	}
	q := feat.Dim()
	record := func(i int, mod func(*featrec.Record)) stream.Message {
		f := make([]float64, 2*q)
		feat.BothViewsTo(f, make([]float64, 2*feat.InputDim()), evs[i].x, []string{evs[i].id})
		r := featrec.Record{ID: evs[i].id, Topic: ms[i].Topic, Partition: ms[i].Partition, Offset: ms[i].Offset,
			Fingerprint: feat.Fingerprint(), Features: f}
		if mod != nil {
			mod(&r)
		}
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return stream.Message{Topic: featrec.Topic, Partition: ms[i].Partition, Offset: int64(1000 + i), Key: []byte(r.ID), Value: b}
	}
	apply := func(src *mapSource) (string, Stats, int) {
		st := tempStore(t)
		in := newTestIngest(t, cfg, st)
		if src != nil {
			in.SetFeatureSource(src, time.Second)
		}
		reasons := 0 // the refused records' reasons, which cairn_rejects_total counts
		for lo := 0; lo < len(ms); lo += 9 {
			res, err := in.Apply(context.Background(), ms[lo:min(lo+9, len(ms))])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Reasons {
				if r == stream.ReasonFeatureMismatch {
					reasons++
				}
			}
		}
		h, err := StateHash(cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := st.Pending(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		dead := 0
		for _, e := range entries {
			var dl stream.DeadLetter
			if e.Topic == cfg.Kafka.Topics.DLQ && json.Unmarshal(e.Value, &dl) == nil && dl.Reason == stream.ReasonFeatureMismatch {
				dead++
			}
		}
		if reasons != dead {
			t.Errorf("%d feature records dead-lettered, %d of them in the batches' Reasons", dead, reasons)
		}
		return h, in.Stats(), dead
	}
	want, _, _ := apply(nil)
	upserts := 41

	all := &mapSource{recs: map[[2]int64][]stream.Message{}}
	for i, ev := range evs {
		if !ev.del {
			k := [2]int64{int64(ms[i].Partition), ms[i].Offset}
			all.recs[k] = append(all.recs[k], record(i, nil))
		}
	}
	all.recs[[2]int64{0, 0}] = append(all.recs[[2]int64{0, 0}], record(0, nil)) // repeated
	if h, st, dead := apply(all); h != want || st.FeaturesTaken != uint64(upserts) || dead != 0 {
		t.Errorf("every record valid: hash %.12s taken %d dead %d; want %.12s, %d, 0", h, st.FeaturesTaken, dead, want, upserts)
	}

	bad := &mapSource{recs: map[[2]int64][]stream.Message{}, refused: []stream.Message{{Topic: featrec.Topic, Value: []byte("junk")}}}
	mods := []func(*featrec.Record){
		func(r *featrec.Record) { r.Fingerprint = "00" + r.Fingerprint[2:] },
		func(r *featrec.Record) { r.ID = "other" },
		func(r *featrec.Record) { r.Offset++ },
		func(r *featrec.Record) { r.Partition++ },
		func(r *featrec.Record) { r.Topic = "other.train" },
		func(r *featrec.Record) { r.Features = r.Features[:2*q-2] },
	}
	for i, mod := range mods {
		bad.recs[[2]int64{int64(ms[i].Partition), ms[i].Offset}] = []stream.Message{record(i, mod)}
	}
	corrupt := record(len(mods), nil)
	corrupt.Value[60] ^= 1
	bad.recs[[2]int64{int64(ms[len(mods)].Partition), ms[len(mods)].Offset}] = []stream.Message{corrupt}
	refused := len(mods) + 2
	if h, st, dead := apply(bad); h != want || st.FeaturesTaken != 0 || st.FeatureRefused != uint64(refused) || dead != refused {
		t.Errorf("invalid records: hash %.12s taken %d refused %d dead letters %d; want %.12s, 0, %d, %d",
			h, st.FeaturesTaken, st.FeatureRefused, dead, want, refused, refused)
	}

	other := &mapSource{recs: map[[2]int64][]stream.Message{{1, 5}: {record(5, func(r *featrec.Record) {
		for j := range r.Features {
			r.Features[j] *= 2
		}
	})}}}
	if h, st, _ := apply(other); h == want || st.FeaturesTaken != 1 {
		t.Errorf("a record with other features: hash %.12s (taken %d), want it to differ from %.12s: records are not used", h, st.FeaturesTaken, want)
	}
}
