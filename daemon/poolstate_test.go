package daemon

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairnhq/cairn/coreset"
	"github.com/cairnhq/cairn/storage"
)

// testPair builds a pool pair over n random points with the test model, synced when
// sync is set, then with one landmark deleted (so the state is inexact and stale, and
// every State field carries a non-default value).
func testPair(t testing.TB, n int) (*Features, coreset.Config, *coreset.Pair, [2]coreset.FeatureSource) {
	t.Helper()
	cfg := testConfig()
	feat, err := NewFeatures(cfg.Model, cfg.Sketch)
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := PoolConfig(cfg, feat.Dim())
	if err != nil {
		t.Fatal(err)
	}
	pr, err := coreset.NewPair(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	d, q := feat.InputDim(), feat.Dim()
	ids, xs := randPoints(rand.New(rand.NewPCG(5, 5)), n, d)
	fs := make([]float64, 2*n*q)
	feat.BothViewsTo(fs, make([]float64, 2*n*d), xs, ids)
	src := [2]coreset.MapSource{{}, {}}
	for i, id := range ids {
		fa, fb := fs[2*i*q:(2*i+1)*q], fs[(2*i+1)*q:(2*i+2)*q]
		src[0][id], src[1][id] = fa, fb
		if err := pr.Insert(id, fa, fb); err != nil {
			t.Fatal(err)
		}
	}
	if n > 0 {
		if err := pr.Sync(src[0], src[1]); err != nil {
			t.Fatal(err)
		}
		if err := pr.Delete(pr.A.Landmarks()[0]); err != nil {
			t.Fatal(err)
		}
	}
	return feat, pcfg, pr, [2]coreset.FeatureSource{src[0], src[1]}
}

// TestPoolCodecRoundTrip: decoding an encoded pool gives pools whose states are deeply
// equal to the originals, and re-encoding gives the same bytes. The field-count guard
// fails when coreset.State grows a field the codec does not know about.
func TestPoolCodecRoundTrip(t *testing.T) {
	for name, want := range map[reflect.Type]int{
		reflect.TypeFor[coreset.State]():      20,
		reflect.TypeFor[coreset.Config]():     6,
		reflect.TypeFor[coreset.Budget]():     2,
		reflect.TypeFor[coreset.SLQOptions](): 4,
		reflect.TypeFor[coreset.PointState](): 3,
	} {
		if got := name.NumField(); got != want {
			t.Errorf("%v has %d fields, the pool codec writes %d: update appendState and reader.state", name, got, want)
		}
	}
	for _, n := range []int{0, 1, 40} {
		feat, pcfg, pr, src := testPair(t, n)
		ps, err := encodePool(feat.Fingerprint(), pr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePool(ps, feat.Fingerprint(), pcfg, src)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for v, pair := range [][2]*coreset.Pool{{pr.A, got.A}, {pr.B, got.B}} {
			if a, b := pair[0].State(), pair[1].State(); !reflect.DeepEqual(a, b) {
				t.Errorf("n=%d view %d: state after round trip\n got %+v\nwant %+v", n, v, b, a)
			}
		}
		again, _ := encodePool(feat.Fingerprint(), got)
		if string(again.Data) != string(ps.Data) {
			t.Errorf("n=%d: re-encoding changed the bytes", n)
		}
	}
}

// TestPoolCodecRejects: damaged blobs are refused with ErrPoolState.
func TestPoolCodecRejects(t *testing.T) {
	feat, pcfg, pr, src := testPair(t, 20)
	ps, _ := encodePool(feat.Fingerprint(), pr)
	mut := func(f func(b []byte) []byte) storage.PoolState {
		return storage.PoolState{Schema: PoolSchema, Data: f(append([]byte(nil), ps.Data...))}
	}
	other := pcfg
	other.Budget.M++
	for _, tc := range []struct {
		name string
		ps   storage.PoolState
		cfg  coreset.Config
	}{
		{"schema 1 (held landmark features)", storage.PoolState{Schema: 1, Data: ps.Data}, pcfg},
		{"empty", storage.PoolState{Schema: PoolSchema}, pcfg},
		{"truncated", mut(func(b []byte) []byte { return b[:len(b)-1] }), pcfg},
		{"trailing", mut(func(b []byte) []byte { return append(b, 0) }), pcfg},
		{"fingerprint", mut(func(b []byte) []byte { b[0] ^= 1; return b }), pcfg},
		{"bool", mut(func(b []byte) []byte { b[len(b)-1] = 2; return b }), pcfg},
		// View a's point count sits after the fingerprint (32), version, dim, budget m,
		// λ, tol (5×8), top-up (1), seed and the four SLQ ints (5×8): byte 113; its
		// top byte 116 makes it ~4e9 points.
		{"huge count", mut(func(b []byte) []byte { b[116] = 0xff; return b }), pcfg},
		{"config", ps, other},
	} {

		if _, err := decodePool(tc.ps, feat.Fingerprint(), tc.cfg, src); !errors.Is(err, ErrPoolState) {
			t.Errorf("%s: error %v, want ErrPoolState", tc.name, err)
		}
	}
	// The landmarks' features come from the stored points; a landmark the source does
	// not know (its point is gone) makes the pool unusable.
	none := [2]coreset.FeatureSource{coreset.MapSource{}, coreset.MapSource{}}
	if _, err := decodePool(ps, feat.Fingerprint(), pcfg, none); !errors.Is(err, ErrPoolState) {
		t.Errorf("unknown landmark: error %v, want ErrPoolState", err)
	}
}

// FuzzDecodePool: the stored pool blob is outside bytes (a file on disk); decoding must
// never panic, every refusal must match ErrPoolState, and an accepted blob must
// re-encode to a blob that decodes to a pool with the same encoding (idempotence).
func FuzzDecodePool(f *testing.F) {
	feat, pcfg, pr, src := testPair(f, 12)
	full, _ := encodePool(feat.Fingerprint(), pr)
	_, _, empty, _ := testPair(f, 0)
	e, _ := encodePool(feat.Fingerprint(), empty)
	f.Add(uint32(PoolSchema), e.Data)
	f.Add(uint32(PoolSchema), full.Data)
	f.Add(uint32(1), full.Data)
	f.Add(uint32(PoolSchema), full.Data[:len(full.Data)/2])
	f.Add(uint32(PoolSchema), []byte{})
	f.Fuzz(func(t *testing.T, schema uint32, data []byte) {
		p, err := decodePool(storage.PoolState{Schema: schema, Data: data}, feat.Fingerprint(), pcfg, src)
		if err != nil {
			if !errors.Is(err, ErrPoolState) {
				t.Fatalf("error %v does not match ErrPoolState", err)
			}
			return
		}
		again, err := encodePool(feat.Fingerprint(), p)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := decodePool(again, feat.Fingerprint(), pcfg, src)
		if err != nil {
			t.Fatalf("re-encoded pool refused: %v", err)
		}
		third, _ := encodePool(feat.Fingerprint(), p2)
		if string(third.Data) != string(again.Data) {
			t.Fatalf("encoding is not idempotent after a round trip")
		}
	})
}
