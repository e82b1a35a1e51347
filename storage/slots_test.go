package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// markedPoint is a point whose input is distinct markers (offset by base), so that
// countMarkers finds exactly its bytes.
func markedPoint(id string, n int, base uint64) Point {
	p := samplePoint(id, n)
	p.X = make([]float64, n)
	for i := range p.X {
		p.X[i] = math.Float64frombits(0x3FF0DEAD_BEEF0000 + base + uint64(i))
	}
	return p
}

// TestSegmentSlots: the points one transaction stores share one segment file, each
// at a block boundary; deleting one of them leaves no byte of its input in any file
// while its neighbours stay readable, and the segment is unlinked once every slot in
// it is erased.
func TestSegmentSlots(t *testing.T) {
	s, path := openTemp(t)
	defer func() { s.Close() }()
	const n = 700 // 5,600 bytes: a slot spans two blocks
	pts := []Point{markedPoint("a", n, 0), markedPoint("b", n, 1000), markedPoint("c", n, 2000)}
	if err := s.Apply(func(tx *Tx) error {
		for _, p := range pts {
			if err := tx.PutPoint(p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids, _, err := slotFiles(slotsDir(path))
	if err != nil || len(ids) != 1 {
		t.Fatalf("slot files %v (%v), want one segment", ids, err)
	}
	if st, err := os.Stat(filepath.Join(slotsDir(path), slotName(ids[0]))); err != nil || uint64(st.Size()) != 2*alignUp(8*n)+8*n {
		t.Fatalf("segment size %v (%v), want %d", st.Size(), err, 2*alignUp(8*n)+8*n)
	}
	del := func(id string) {
		t.Helper()
		if err := s.Apply(func(tx *Tx) error {
			ok, err := tx.DeletePoint(id)
			if err == nil && !ok {
				err = errors.New("not stored")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	del("b")
	if got := countMarkers(t, path, pts[1].X); got != 0 {
		t.Errorf("%d of b's %d input values still in the files after its deletion", got, n)
	}
	for _, p := range []Point{pts[0], pts[2]} {
		if got := countMarkers(t, path, p.X); got != n {
			t.Errorf("%d of %s's %d input values in the files, want all", got, p.ID, n)
		}
	}
	s = reopen(t, s) // read back from the file, not a cache
	if err := s.View(func(tx *ReadTx) error {
		for _, want := range []Point{pts[0], pts[2]} {
			got, ok, err := tx.Point(want.ID)
			if err != nil || !ok || !slices.Equal(got.X, want.X) {
				t.Errorf("point %s after b's deletion: ok %v err %v, input equal %v", want.ID, ok, err, slices.Equal(got.X, want.X))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	del("a")
	del("c")
	if ids, _, err := slotFiles(slotsDir(path)); err != nil || len(ids) != 0 {
		t.Errorf("slot files %v (%v) after every point's deletion, want none", ids, err)
	}
}

// TestSegmentOfUncommittedTx: a transaction that fails leaves no segment behind, and
// a segment named above slot_last (a crash between writing it and the commit) is
// erased by the next Open.
func TestSegmentOfUncommittedTx(t *testing.T) {
	s, path := openTemp(t)
	p := markedPoint("a", 16, 0)
	errBoom := errors.New("boom")
	if err := s.Apply(func(tx *Tx) error {
		if err := tx.PutPoint(p); err != nil {
			return err
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		t.Fatalf("Apply = %v, want boom", err)
	}
	if ids, _, _ := slotFiles(slotsDir(path)); len(ids) != 0 {
		t.Errorf("segments %v after a failed transaction, want none", ids)
	}
	s.Close()
	orphan := filepath.Join(slotsDir(path), slotName(99))
	if err := os.WriteFile(orphan, slotBytes(p.X), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("segment above slot_last still there after Open: %v", err)
	}
}

// TestPointSlotCodec: a format 4–7 slot reference (no segment) reads as its own
// segment at offset 0; a format 8 one round-trips; a segment reference that a writer
// never produces is refused.
func TestPointSlotCodec(t *testing.T) {
	p := samplePoint("k", 3)
	p.X = nil
	for _, tc := range []struct {
		ref  slotRef
		want slotRef
		ok   bool
	}{
		{slotRef{id: 7, n: 24, crc: 1, seg: 7}, slotRef{id: 7, n: 24, crc: 1, seg: 7}, true},
		{slotRef{id: 9, n: 24, crc: 1, seg: 7, off: 8192}, slotRef{id: 9, n: 24, crc: 1, seg: 7, off: 8192}, true},
		{slotRef{id: 9, n: 24, crc: 1, seg: 7, off: 100}, slotRef{}, false},  // not aligned
		{slotRef{id: 7, n: 24, crc: 1, seg: 9, off: 4096}, slotRef{}, false}, // segment after its slot
	} {
		_, got, why := decodePoint([]byte("k"), encodePoint([]byte("k"), &p, &tc.ref))
		if tc.ok && (why != "" || got == nil || *got != tc.want) {
			t.Errorf("ref %+v: decoded %+v (%s), want %+v", tc.ref, got, why, tc.want)
		}
		if !tc.ok && why == "" {
			t.Errorf("ref %+v: decoded %+v, want a refusal", tc.ref, got)
		}
	}
	holes := []slotHole{{seg: 3, off: 4096, n: 8192}, {seg: 5}}
	got, why := decodeHoles(metaSlotDropped, encodeHoles(metaSlotDropped, holes))
	if why != "" || !slices.Equal(got, holes) {
		t.Errorf("holes round trip: %v (%s), want %v", got, why, holes)
	}
	if _, why := decodeHoles(metaSlotDropped, encodeMetaU64s(metaSlotDropped, []uint64{1, 2})); why == "" {
		t.Error("a slots_dropped of 2 values decoded as holes")
	}
}

// TestPointPartitionCodec: a point's partition round-trips, -1 stores none, and a
// value without one (every point before format 8) reads back as -1.
func TestPointPartitionCodec(t *testing.T) {
	for _, part := range []int32{0, 3, math.MaxInt32, -1} {
		p := samplePoint("k", 2)
		p.Partition = part
		ref := slotRef{id: 1, n: 16, crc: 1, seg: 1}
		got, _, why := decodePoint([]byte("k"), encodePoint([]byte("k"), &p, &ref))
		if why != "" || got.Partition != part {
			t.Errorf("partition %d: decoded %d (%s)", part, got.Partition, why)
		}
	}
}
