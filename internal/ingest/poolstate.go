package ingest

import (
	"encoding/hex"
	"fmt"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/storage"
)

// PoolSchema is the schema number of the pool blob in storage.PoolState.Schema and of
// the per-point records beside it; the layout is in storage/FORMAT.md "Pool state", the
// encoding of each view's state and of a record is coreset's (State.AppendBinary,
// AppendPairRecord). Schema 1 also held the landmarks' features (2·m·q floats, 16 MiB
// per batch at the default m = 256, q = 4096) and is refused; schema 2 held one record
// per stored point inside the blob (O(n) bytes per batch) and is still read, and
// converted at restore (New); schema 3 keeps those records in the store's poolpoints
// bucket, one per point, written only when they change; schema 4 is schema 3 with
// coreset.Config.Normalize in each view's state (pool.normalize); schema 5 is schema 4
// with coreset.Config.Tolerance and each greedy step's max and its holder (StepMax,
// StepMaxIDs) in each view's state (pool.tolerance). Schemas 2 and 3 are read with
// Normalize = false (they pivoted on raw residuals), schemas 2 to 4 with Tolerance = 0
// (the exact argmax), and converted at restore.
const PoolSchema = 5

// poolSchema4, poolSchema3 and poolSchema2 are the previous schemas, read (not
// written) so older stores still open.
const (
	poolSchema4 = 4
	poolSchema3 = 3
	poolSchema2 = 2
)

// fingerprintLen is the length of the features fingerprint that starts the blob.
const fingerprintLen = 32

// encodePool serializes the two-view pool's core for tx.PutPoolState: the features
// fingerprint, then coreset.Pool.CoreState of both views, without the per-point
// records: O(m²) work and bytes whatever the number of stored points. Equal pools give
// equal bytes. The per-point records are written separately (putRecord, putAllRecords).
func encodePool(fp string, pr *coreset.Pair) (storage.PoolState, error) {
	w, err := hex.DecodeString(fp)
	if err != nil || len(w) != fingerprintLen {
		return storage.PoolState{}, fmt.Errorf("ingest: fingerprint %q is not %d hex bytes", fp, fingerprintLen)
	}
	a, b := pr.A.CoreState(), pr.B.CoreState()
	w, _ = a.AppendBinary(w)
	w, _ = b.AppendBinary(w)
	return storage.PoolState{Schema: PoolSchema, Data: w}, nil
}

// putRecord writes the current record of point id, if the pool holds it (an upsert
// deleted later in the same batch has none: its DeletePoint removes the point and any
// record). Insert changes only the inserted point's record and Delete only drops the
// deleted one's (coreset.Pool.Generation), so an applied batch writes one record per
// upsert and none per delete.
func putRecord(tx *storage.Tx, pr *coreset.Pair, buf []byte, id string) ([]byte, error) {
	a, okA := pr.A.PointState(id)
	b, okB := pr.B.PointState(id)
	if okA != okB {
		return buf, fmt.Errorf("ingest: point %q is in one view's pool only (a %v, b %v)", id, okA, okB)
	}
	if !okA {
		return buf, nil
	}
	buf = coreset.AppendPairRecord(buf[:0], a, b)
	return buf, tx.PutPoolPoint(id, buf)
}

// putAllRecords rewrites the record of every stored point ids (sorted, so bbolt appends
// in key order): after an Adopt every residual changed. This is the O(n) part of a sync.
func putAllRecords(tx *storage.Tx, pr *coreset.Pair, ids []string) error {
	if len(ids) != pr.A.Len() {
		return fmt.Errorf("ingest: %d ids for a pool of %d points", len(ids), pr.A.Len())
	}
	var buf []byte
	for _, id := range ids {
		if !pr.A.Has(id) {
			return fmt.Errorf("ingest: stored point %q is not in the pool", id)
		}
		var err error
		if buf, err = putRecord(tx, pr, buf, id); err != nil {
			return err
		}
	}
	return nil
}

// storedRecord is one per-point record as read from the store (ForEachPoolPoint).
type storedRecord struct {
	id  string
	rec []byte
}

// readPool reads the stored pool blob (ok false when there is none) and every
// per-point record, in id order.
func readPool(tx *storage.ReadTx) (ps storage.PoolState, ok bool, recs []storedRecord, err error) {
	if ps, ok, err = tx.PoolState(); err != nil {
		return ps, ok, nil, err
	}
	err = tx.ForEachPoolPoint(func(id string, rec []byte) error {
		recs = append(recs, storedRecord{id, rec})
		return nil
	})
	return ps, ok, recs, err
}

// parsePool parses a stored pool blob into the fingerprint and the two views' states,
// without their landmark features (which the blob does not hold). States of schema 3
// and later have no Points (the records are stored beside the blob, see poolStates);
// schema 2 states carry them. It refuses schema 1 and unknown schemas by number, and a malformed blob
// naming the view, the field and its offset.
// Fingerprint returns the feature-pipeline fingerprint a stored pool state was built
// with (pipeline.Features.Fingerprint), or ErrPoolState when the blob does not parse.
func Fingerprint(ps storage.PoolState) (string, error) {
	fp, _, _, err := parsePool(ps)
	return fp, err
}

func parsePool(ps storage.PoolState) (fp string, a, b coreset.State, err error) {
	decode := coreset.DecodeState
	switch ps.Schema {
	case PoolSchema:
	case poolSchema4:
		decode = coreset.DecodeStateWithoutTolerance
	case poolSchema3:
		decode = coreset.DecodeStateWithoutNormalize
	case poolSchema2:
		decode = coreset.DecodeStateWithPoints
	case 1:
		return "", a, b, fmt.Errorf("%w: schema 1 (the landmarks' features inside the blob, written before schema 2) is no longer read; rebuild the pool", ErrPoolState)
	default:
		return "", a, b, fmt.Errorf("%w: schema %d, want %d (or %d, %d or %d, converted at restore)", ErrPoolState, ps.Schema, PoolSchema, poolSchema4, poolSchema3, poolSchema2)
	}
	if len(ps.Data) < fingerprintLen {
		return "", a, b, fmt.Errorf("%w: blob of %d bytes is shorter than the %d-byte features fingerprint", ErrPoolState, len(ps.Data), fingerprintLen)
	}
	fp = hex.EncodeToString(ps.Data[:fingerprintLen])
	rest := ps.Data[fingerprintLen:]
	for _, v := range []struct {
		name string
		st   *coreset.State
	}{{"a", &a}, {"b", &b}} {
		off := len(ps.Data) - len(rest)
		if *v.st, rest, err = decode(rest); err != nil {
			return "", a, b, fmt.Errorf("%w: view %s (from byte %d of the blob): %w", ErrPoolState, v.name, off, err)
		}
	}
	if len(rest) != 0 {
		return "", a, b, fmt.Errorf("%w: %d trailing bytes after the pool state", ErrPoolState, len(rest))
	}
	return fp, a, b, nil
}

// poolStates parses the blob and fills both views' Points: from the records recs (id
// order) for schemas 3 and later, from the blob for schema 2, which must then come without
// records (a store holds one or the other).
func poolStates(ps storage.PoolState, recs []storedRecord) (fp string, a, b coreset.State, err error) {
	if fp, a, b, err = parsePool(ps); err != nil {
		return fp, a, b, err
	}
	if ps.Schema == poolSchema2 {
		if len(recs) != 0 {
			return fp, a, b, fmt.Errorf("%w: a schema %d pool (records inside the blob) with %d per-point records in the store", ErrPoolState, ps.Schema, len(recs))
		}
		return fp, a, b, nil
	}
	a.Points = make([]coreset.PointState, len(recs))
	b.Points = make([]coreset.PointState, len(recs))
	for i, r := range recs {
		if a.Points[i], b.Points[i], err = coreset.DecodePairRecord(r.id, r.rec); err != nil {
			return fp, a, b, fmt.Errorf("%w: %w", ErrPoolState, err)
		}
	}
	return fp, a, b, nil
}

// decodePool restores a stored pool from its blob and its per-point records (recs, id
// order; none for a schema 2 blob), filling each view's landmark features from src[view]
// (the point cache at restart: ψ is deterministic per point, so they are bit-identical
// to the features the pool held). It refuses another schema, a short or overlong blob or
// record, a pool of another feature pipeline (fp) or pool configuration (want), a
// landmark src does not know, two views holding different points, and anything
// coreset.Restore finds inconsistent. It never panics on any bytes.
//
// A pool whose configuration differs from want in its pivoting rule only (Normalize,
// Tolerance) is not refused: a schema 3 or 2 pool was selected on raw residuals
// (Normalize = false, the only rule then), a schema 4, 3 or 2 pool by the exact argmax
// (Tolerance = 0), and meets the defaults pool.normalize = true and pool.tolerance =
// 0.6, or the configured rule was changed. It takes the configured rule and keeps its
// landmarks, certificate and records (all on the raw kernel, exact as they were),
// marked stale from position 0 if it has landmarks, so the next sync (SyncDue holds at
// once) re-selects under the configured rule. Until then it serves its last selection,
// as any stale pool does; the step maxima an older schema lacks are never read before
// that sync (coreset.Restore).
func decodePool(ps storage.PoolState, recs []storedRecord, fp string, want coreset.Config, src [2]coreset.FeatureSource) (*coreset.Pair, error) {
	got, a, b, err := poolStates(ps, recs)
	if err != nil {
		return nil, err
	}
	if got != fp {
		return nil, fmt.Errorf("%w: features fingerprint %s, the configured model has %s (model, weights, sketch or seed changed; rebuild the pool)",
			ErrPoolState, got, fp)
	}
	pr := &coreset.Pair{}
	for _, v := range []struct {
		name string
		view int
		st   *coreset.State
		dst  **coreset.Pool
	}{{"a", 0, &a, &pr.A}, {"b", 1, &b, &pr.B}} {
		if err := v.st.Config.Validate(); err != nil { // before taking the configured rule
			return nil, fmt.Errorf("%w: view %s: %w", ErrPoolState, v.name, err)
		}
		if c := &v.st.Config; c.Normalize != want.Normalize || c.Tolerance != want.Tolerance {
			c.Normalize, c.Tolerance = want.Normalize, want.Tolerance
			if len(v.st.Landmarks) > 0 { // none: nothing to re-select
				v.st.Stale, v.st.StaleFrom = true, 0
			}
		}
		if v.st.Config != want {
			return nil, fmt.Errorf("%w: view %s pool config %+v, configured %+v", ErrPoolState, v.name, v.st.Config, want)
		}
		q := want.Dim
		v.st.LandmarkFeatures = make([]float64, len(v.st.Landmarks)*q)
		for i, id := range v.st.Landmarks {
			if err := src[v.view].FeaturesTo(v.st.LandmarkFeatures[i*q:(i+1)*q], id); err != nil {
				return nil, fmt.Errorf("%w: view %s landmark %q: %w", ErrPoolState, v.name, id, err)
			}
		}
		p, err := coreset.Restore(*v.st)
		if err != nil {
			return nil, fmt.Errorf("%w: view %s: %w", ErrPoolState, v.name, err)
		}
		*v.dst = p
	}
	if pr.A.Len() != pr.B.Len() {
		return nil, fmt.Errorf("%w: view a holds %d points, view b %d", ErrPoolState, pr.A.Len(), pr.B.Len())
	}
	for _, pt := range a.Points {
		if !pr.B.Has(pt.ID) {
			return nil, fmt.Errorf("%w: point %q is in view a but not in view b", ErrPoolState, pt.ID)
		}
	}
	return pr, nil
}
