package ingest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/cairn/internal/featrec"
	"github.com/cairnhq/cairn/stream"
)

// DefaultFeatureTimeout is how long a batch waits for the next of its featurizers'
// records by default (config ingest.featurizer_timeout).
const DefaultFeatureTimeout = 2 * time.Second

// FeatureRequest names one training upsert whose features a FeatureSource may hold:
// the event's coordinates and its id.
type FeatureRequest struct {
	Topic     string
	Partition int
	Offset    int64
	ID        string
}

// FeatureSource is where the primary finds features that featurizers computed
// (internal/featsource reads them from cairn.features). The State validates every
// record it is handed (doc.go "Featurizers"), so a source only files records by their
// training event.
type FeatureSource interface {
	// Lookup sets got[i] to the records (features-topic messages) it holds for want[i],
	// the same partition and offset, and hands them over (it forgets them, and every
	// record of a requested partition at or below the highest offset requested there).
	// It waits until it holds one for every request, until no record of the batch has
	// come for patience (counted from the call and from each record it hands over),
	// or until ctx ends, and may stop waiting sooner when no record has come at all for
	// a while (featurizers gone). So a batch whose records keep coming waits for all of
	// them, however slow the backbone. It returns the messages of the features topic it
	// could not file (not a record), for the State to dead-letter. got has len(want)
	// entries, all nil on entry.
	Lookup(ctx context.Context, patience time.Duration, want []FeatureRequest, got [][]stream.Message) (refused []stream.Message)
}

// SetFeatureSource makes the State take the features of its upserts from src, waiting
// for them until none has come for timeout (FeatureSource.Lookup's patience), and
// compute only what src does not hold (doc.go "Featurizers"). Call it before the first
// Apply; nil (the default) computes every feature here.
func (in *State) SetFeatureSource(src FeatureSource, timeout time.Duration) {
	in.src, in.srcWait = src, timeout
}

// featuresFrom fills in.feats (as featurize) from in.src's records where they are
// valid, dead-letters the records that are not (into in.featDead), and computes the
// rows no valid record gave with BothViewsTo on those rows alone. A row is a pure
// function of the point, so the result is the same bits whichever rows came from
// records.
func (in *State) featuresFrom(ctx context.Context) error {
	n, q := len(in.ids), in.feat.Dim()
	in.have = slices.Grow(in.have[:0], n)[:n]
	clear(in.have)
	in.reqs, in.reqOps = in.reqs[:0], in.reqOps[:0]
	for i := range in.ops {
		// A claim (cairnd's own republication) is computed here: featurizers need not
		// have a record of it.
		if o := &in.ops[i]; o.kind == opUpsert && !o.isClaim {
			in.reqs = append(in.reqs, FeatureRequest{Topic: o.msg.Topic, Partition: o.msg.Partition, Offset: o.msg.Offset, ID: o.ev.ID})
			in.reqOps = append(in.reqOps, i)
		}
	}
	if len(in.reqs) > 0 {
		in.got = slices.Grow(in.got[:0], len(in.reqs))[:len(in.reqs)]
		clear(in.got)
		refused := in.src.Lookup(ctx, in.srcWait, in.reqs, in.got)
		for _, m := range refused {
			if err := in.refuseRecord(m, "not a feature record"); err != nil {
				return err
			}
		}
		for r, recs := range in.got {
			o := &in.ops[in.reqOps[r]]
			for _, m := range recs {
				if err := in.takeRecord(o, m, q); err != nil {
					return err
				}
			}
		}
		clear(in.got) // drop the records' bytes
	}
	in.featurizeMissing(n, q)
	return nil
}

// takeRecord widens the features of record m into o's rows if it is valid for o and
// the rows are not filled yet, and dead-letters it if it is not valid. The record is
// validated in place (featrec.Parse), so a valid one costs no allocation or copy.
func (in *State) takeRecord(o *op, m stream.Message, q int) error {
	rec, err := featrec.Parse(m.Value)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case !rec.FingerprintIs(in.feat.Fingerprint()):
		why = fmt.Sprintf("pipeline fingerprint %.8x…, this primary's is %.16s…", rec.Fingerprint[:], in.feat.Fingerprint())
	case rec.Dim != q:
		why = fmt.Sprintf("%d features, want %d", 2*rec.Dim, 2*q)
	case string(rec.ID) != o.ev.ID || string(rec.Topic) != o.msg.Topic || rec.Partition != o.msg.Partition || rec.Offset != o.msg.Offset:
		why = fmt.Sprintf("names id %q at %s/%d@%d, the event is id %q at %s/%d@%d", rec.ID, rec.Topic, rec.Partition,
			rec.Offset, o.ev.ID, o.msg.Topic, o.msg.Partition, o.msg.Offset)
	}
	if why != "" {
		return in.refuseRecord(m, why)
	}
	if in.have[o.row] {
		return nil // a repeated record (a featurizer's batch written twice): the same bits
	}
	rec.FeaturesTo(in.feats[2*o.row*q : (2*o.row+2)*q])
	in.have[o.row] = true
	in.batchTaken++
	return nil
}

// refuseRecord dead-letters the features-topic message m (feature_mismatch), without
// its raw bytes: the primary computes the features it would have given.
func (in *State) refuseRecord(m stream.Message, why string) error {
	rej := &stream.RejectError{Reason: stream.ReasonFeatureMismatch, Msg: why}
	dm, err := stream.DeadLetterMessage(in.dlq, m, rej, false)
	if err != nil {
		return fmt.Errorf("ingest: dead letter for feature record %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err)
	}
	in.featDead = append(in.featDead, dm)
	in.log.Warn().Str("topic", m.Topic).Int("partition", m.Partition).Int64("offset", m.Offset).
		Str("reason", string(rej.Reason)).Str("why", why).Msg("dead-lettered a feature record; computing its features here")
	return nil
}

// featurizeMissing computes the rows of the n upserts that have no record (in.have
// false) with BothViewsTo on those points alone, and copies them into in.feats.
func (in *State) featurizeMissing(n, q int) {
	d := in.feat.InputDim()
	in.lids, in.lxs, in.lrows = in.lids[:0], in.lxs[:0], in.lrows[:0]
	for r := range n {
		if !in.have[r] {
			in.lids = append(in.lids, in.ids[r])
			in.lxs = append(in.lxs, in.xs[r*d:(r+1)*d]...)
			in.lrows = append(in.lrows, r)
		}
	}
	defer clear(in.lids)
	m := len(in.lids)
	if m == 0 {
		return
	}
	in.views = grow(in.views, 2*m*d)
	in.lfeats = grow(in.lfeats, 2*m*q)
	in.feat.BothViewsTo(in.lfeats, in.views, in.lxs, in.lids)
	for i, r := range in.lrows {
		copy(in.feats[2*r*q:(2*r+2)*q], in.lfeats[2*i*q:(2*i+2)*q])
	}
}
