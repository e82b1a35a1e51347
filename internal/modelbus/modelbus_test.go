package modelbus

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/internal/base/binenc"
)

// sample is a version of m landmarks of dimension d, k columns, random entries.
func sample(version uint64, m, d, k int) Version {
	r := rand.New(rand.NewPCG(version, 7))
	f := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	v := Version{Features: "feat", Version: version, ID: "model-id", Points: 1000, Rows: m, Cols: k,
		X: f(m * d), A: f(m * k), B: f(k), Scale: 0.5, Omega: f(m), OmegaMean: f(m), Tau2: f(m),
		Residual: [2]certify.Residual{{TraceR: 1, TraceK: 10, Exact: true, UnroundedBound: 1.5}, {TraceR: 2, TraceK: 20}}}
	for l := range m {
		v.LandmarkIDs = append(v.LandmarkIDs, string(rune('a'+l%26))+string(rune('0'+l/26)))
		v.Views = append(v.Views, "AB"[l%2])
		v.Masked = append(v.Masked, l == 3)
	}
	return v
}

func TestVersionRoundTrip(t *testing.T) {
	v := sample(5, 40, 17, 6)
	got, err := DecodeVersion(v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("decoded version differs from the encoded one")
	}
	// A measured pool stability travels; a version encoded without it (as before the
	// field existed) decodes as not measured, and a flag byte of 0 or a value outside
	// [0, 1] is refused.
	ps := 0.75
	v.PoolStability = &ps
	if got, err = DecodeVersion(v.Encode()); err != nil || got.PoolStability == nil || *got.PoolStability != ps {
		t.Fatalf("pool stability: %v, %v", err, got.PoolStability)
	}
	enc := v.Encode()
	v.PoolStability = nil
	if got, err = DecodeVersion(v.Encode()); err != nil || got.PoolStability != nil || len(enc) != len(v.Encode())+9 {
		t.Fatalf("without pool stability: %v, %v", err, got.PoolStability)
	}
	bad := bytes.Clone(enc)
	bad[len(bad)-9] = 0
	if _, err := DecodeVersion(bad); err == nil {
		t.Fatal("a zero pool-stability flag decoded")
	}
	bad = binenc.AppendF64(bytes.Clone(enc[:len(enc)-8]), 1.5)
	if _, err := DecodeVersion(bad); err == nil {
		t.Fatal("a pool stability of 1.5 decoded")
	}
	// One fit: no ω̄ or τ²; they come back nil.
	v.OmegaMean, v.Tau2 = nil, nil
	if got, err = DecodeVersion(v.Encode()); err != nil || got.OmegaMean != nil || got.Tau2 != nil {
		t.Fatalf("without ω̄, τ²: %v, %v, %v", err, got.OmegaMean, got.Tau2)
	}
}

func TestVersionRejects(t *testing.T) {
	for name, edit := range map[string]func(v *Version){
		"no version":   func(v *Version) { v.Version = 0 },
		"views":        func(v *Version) { v.Views = v.Views[1:] },
		"view letter":  func(v *Version) { v.Views[0] = 'C' },
		"omega":        func(v *Version) { v.Omega = v.Omega[1:] },
		"shape of A":   func(v *Version) { v.Rows, v.A = v.Rows-1, v.A[v.Cols:] },
		"b":            func(v *Version) { v.B = v.B[1:] },
		"x":            func(v *Version) { v.X = v.X[1:] },
		"scale":        func(v *Version) { v.Scale = 0 },
		"nan":          func(v *Version) { v.A[2] = math.NaN() },
		"inf in omega": func(v *Version) { v.Omega[0] = math.Inf(1) },
		"tau2":         func(v *Version) { v.Tau2 = v.Tau2[:2] },
	} {
		v := sample(2, 8, 3, 2)
		edit(&v)
		if _, err := DecodeVersion(v.Encode()); !errors.Is(err, ErrMessage) {
			t.Errorf("%s: got %v, want ErrMessage", name, err)
		}
	}
	b := sample(2, 8, 3, 2)
	p := b.Encode()
	if _, err := DecodeVersion(append(p, 0)); !errors.Is(err, ErrMessage) {
		t.Errorf("trailing byte: %v", err)
	}
	if _, err := DecodeVersion(p[:len(p)-1]); !errors.Is(err, ErrMessage) {
		t.Errorf("truncated: %v", err)
	}
}

// feed adds msgs to a and returns the versions completed.
func feed(t *testing.T, a *Assembler, msgs []Message) []*Version {
	t.Helper()
	var out []*Version
	for _, m := range msgs {
		v, err := a.Add(m.Key, m.Value)
		if err != nil {
			t.Fatalf("add %q: %v", m.Key, err)
		}
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

func TestAssembleChunks(t *testing.T) {
	v := sample(3, 50, 20, 8)
	msgs := Chunks(&v, 1000)
	if n := len(msgs); n < 10 {
		t.Fatalf("%d messages; want the encoding cut into many 1000-byte chunks", n)
	}
	for _, m := range msgs[:len(msgs)-1] {
		if len(m.Value) > 1000+64 {
			t.Fatalf("chunk %q is %d bytes", m.Key, len(m.Value))
		}
	}
	// Manifest first, chunks shuffled with a duplicate: the version completes once.
	r := rand.New(rand.NewPCG(1, 2))
	order := append([]Message{msgs[len(msgs)-1]}, msgs[:len(msgs)-1]...)
	r.Shuffle(len(order)-1, func(i, j int) { order[i+1], order[j+1] = order[j+1], order[i+1] })
	order = append(order, msgs[2])
	a := &Assembler{Features: "feat"}
	got := feed(t, a, order)
	if len(got) != 1 || !reflect.DeepEqual(*got[0], v) {
		t.Fatalf("got %d versions (want 1, equal to the published one)", len(got))
	}
	if a.Latest() != 3 || a.held != 0 {
		t.Fatalf("latest %d, held %d bytes; want 3, 0", a.Latest(), a.held)
	}
	// An older version arriving late is ignored.
	old := sample(2, 5, 20, 8)
	if got := feed(t, a, Chunks(&old, 0)); len(got) != 0 {
		t.Fatalf("an older version was installed")
	}
}

func TestAssembleRefuses(t *testing.T) {
	v := sample(4, 10, 5, 3)
	msgs := Chunks(&v, 200)
	// A chunk with a flipped byte inside a valid frame: the checksum fails.
	bad := append([]Message(nil), msgs...)
	bad[1].Value = bytes.Clone(bad[1].Value)
	bad[1].Value[len(bad[1].Value)-1] ^= 1
	a := &Assembler{}
	var err error
	for _, m := range bad {
		if _, e := a.Add(m.Key, m.Value); e != nil {
			err = e
		}
	}
	if !errors.Is(err, ErrMessage) || a.Latest() != 0 {
		t.Fatalf("corrupt chunk: err %v, latest %d", err, a.Latest())
	}
	// The intact copy, re-sent, still completes.
	if got := feed(t, a, msgs); len(got) != 1 {
		t.Fatalf("intact version after a corrupt one: %d versions", len(got))
	}
	// A version rewritten under the same keys (a deleted row zeroed): a reader that
	// met old chunks with the new manifest completes once the new chunks arrive.
	w := sample(8, 10, 5, 3)
	old := Chunks(&w, 200)
	clear(w.X[:5])
	w.Masked[0] = true
	rewritten := Chunks(&w, 200)
	c := &Assembler{}
	feed(t, c, old[:len(old)-1]) // every old chunk, not its manifest
	if _, err := c.Add(rewritten[len(rewritten)-1].Key, rewritten[len(rewritten)-1].Value); !errors.Is(err, ErrMessage) {
		t.Fatalf("mixed chunks: %v", err)
	}
	got := feed(t, c, rewritten[:len(rewritten)-1])
	if len(got) != 1 || !reflect.DeepEqual(*got[0], w) {
		t.Fatalf("rewritten version: %d versions", len(got))
	}
	// Another feature pipeline.
	b := &Assembler{Features: "other"}
	for _, m := range msgs {
		_, err = b.Add(m.Key, m.Value)
	}
	if !errors.Is(err, ErrFeatures) {
		t.Fatalf("features mismatch: %v", err)
	}
	// A key that does not name its value.
	if _, err := a.Add([]byte("v/9/0"), msgs[0].Value); !errors.Is(err, ErrMessage) {
		t.Fatalf("misnamed chunk: %v", err)
	}
}

func TestMaskFence(t *testing.T) {
	a := &Assembler{}
	feed(t, a, []Message{Mask(3, []string{"x", "y"}), Mask(5, []string{"z"}), Mask(4, []string{"y", "w"})})
	for _, c := range []struct {
		v    uint64
		want []string
	}{{2, []string{"w", "x", "y", "z"}}, {3, []string{"w", "x", "y", "z"}}, {4, []string{"w", "y", "z"}}, {5, []string{"z"}}, {6, nil}} {
		if got := a.MaskFor(c.v); !reflect.DeepEqual(got, c.want) {
			t.Errorf("MaskFor(%d) = %v, want %v", c.v, got, c.want)
		}
	}
	// A tombstone of mask/3 removes it; the chunks' tombstones are accepted.
	feed(t, a, Tombstones(3, 2))
	if got := a.MaskFor(3); !reflect.DeepEqual(got, []string{"w", "y", "z"}) {
		t.Errorf("after the tombstone: %v", got)
	}
}

func TestDecodeKeys(t *testing.T) {
	for _, k := range []string{"", "v/", "v/0", "v/01", "v/1/", "v/1/x", "mask/", "mask/0", "w/1", "v/-1", "v/1/99999999999"} {
		if _, err := Decode([]byte(k), nil); !errors.Is(err, ErrMessage) {
			t.Errorf("key %q: %v, want ErrMessage", k, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	v := sample(2, 4, 3, 2)
	for _, m := range append(Chunks(&v, 64), Mask(2, []string{"a"})) {
		f.Add(m.Key, m.Value)
	}
	f.Add([]byte("v/1"), []byte(nil))
	content, index := ContentChunks(&v)
	for _, m := range append(content, index) {
		f.Add(m.Key, m.Value)
	}
	pm, _ := PointMessage(Point{ID: "p1", Version: 9, Label: 3, X: []float64{0, 0.5, 0, 0, 0, 0, 0, 0, 1}})
	cm := ClassesMessage(10)
	for _, m := range []Message{pm, cm, {Key: []byte("p/p1")}} {
		f.Add(m.Key, m.Value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := Decode(key, value)
		if err != nil {
			if !errors.Is(err, ErrMessage) {
				t.Fatalf("error %v does not match ErrMessage", err)
			}
			return
		}
		if d.Kind == KindChunk && d.Index >= d.Count {
			t.Fatalf("accepted chunk %d of %d", d.Index, d.Count)
		}
		if p := d.Point; d.Kind == KindPoint && (p == nil || len(p.X) == 0 || p.Version < 0 || p.Label < 0) {
			t.Fatalf("accepted point %+v", p)
		}
		var a Assembler
		_, _ = a.Add(key, value)
	})
}

func FuzzDecodeVersion(f *testing.F) {
	v := sample(2, 4, 3, 2)
	f.Add(v.Encode())
	f.Fuzz(func(t *testing.T, p []byte) {
		v, err := DecodeVersion(p)
		if err != nil {
			if !errors.Is(err, ErrMessage) {
				t.Fatalf("error %v does not match ErrMessage", err)
			}
			return
		}
		// Accepted: re-encoding gives the same bytes, and the shapes are usable.
		if !bytes.Equal(v.Encode(), p) {
			t.Fatalf("re-encoding differs")
		}
		_ = v.Input()
	})
}

// TestPointRecords: a point record and the class count decode to what was encoded
// (inputs deflated or raw), a point key's tombstone names its id, the Assembler ignores
// them, and damaged records are refused with ErrMessage: a wrong kind under the key, a
// non-finite input, an empty id, an input over MaxChunk.
func TestPointRecords(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	sparse := make([]float64, 784) // deflates (MNIST's zero background)
	sparse[100] = 0.25
	dense := make([]float64, 64) // random bits: stays raw
	for i := range dense {
		dense[i] = rnd.NormFloat64()
	}
	for _, p := range []Point{{ID: "mnist/train/000001", Version: 41, Label: 7, X: sparse}, {ID: "é", Version: 0, Label: 0, X: dense}} {
		m, ok := PointMessage(p)
		if !ok {
			t.Fatalf("%s: not encodable", p.ID)
		}
		d, err := Decode(m.Key, m.Value)
		if err != nil || d.Kind != KindPoint || d.Point == nil {
			t.Fatalf("%s: %+v %v", p.ID, d, err)
		}
		if got := *d.Point; got.ID != p.ID || got.Version != p.Version || got.Label != p.Label || !slices.Equal(got.X, p.X) {
			t.Errorf("decoded %+v, want %+v", got, p)
		}
		var a Assembler
		if v, err := a.Add(m.Key, m.Value); v != nil || err != nil {
			t.Errorf("the Assembler took a point record: %v %v", v, err)
		}
	}
	if m, _ := PointMessage(Point{ID: "s", X: sparse}); len(m.Value) > 8*len(sparse)/4 {
		t.Errorf("a sparse input takes %d bytes, want it deflated", len(m.Value))
	}
	d, err := Decode([]byte("p/x"), nil)
	if err != nil || d.Kind != KindTombstone || d.Point == nil || d.Point.ID != "x" {
		t.Errorf("tombstone: %+v %v", d, err)
	}
	c := ClassesMessage(10)
	if d, err := Decode(c.Key, c.Value); err != nil || d.Kind != KindClasses || d.Version != 10 {
		t.Errorf("classes: %+v %v", d, err)
	}
	if _, ok := PointMessage(Point{ID: "big", X: make([]float64, MaxChunk/8)}); ok {
		t.Error("an input over MaxChunk was encoded")
	}
	good, _ := PointMessage(Point{ID: "a", Version: 1, Label: 1, X: []float64{1, 2}})
	nan, _ := PointMessage(Point{ID: "a", Version: 1, Label: 1, X: []float64{1, math.NaN()}})
	for name, m := range map[string]Message{
		"mask under a point key": {Key: []byte("p/a"), Value: Mask(1, nil).Value},
		"non-finite input":       nan,
		"empty id":               {Key: []byte("p/"), Value: good.Value},
		"truncated":              {Key: good.Key, Value: good.Value[:len(good.Value)-1]},
		"point under classes":    {Key: []byte(ClassesKey), Value: good.Value},
		"zero classes":           ClassesMessage(0),
	} {
		if _, err := Decode(m.Key, m.Value); !errors.Is(err, ErrMessage) {
			t.Errorf("%s: %v, want ErrMessage", name, err)
		}
	}
}
