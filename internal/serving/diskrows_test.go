package serving

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/entk"
)

// diskCases are the two representations of exact rows, each served from memory and
// forced to disk (a memory budget of one byte): factored rows of a dense backbone (46
// floats per landmark of mlp:6-8-4; 4 KiB of memory holds them, not the full rows) and
// full rows of a convnet, which has no factored form.
var diskCases = []struct {
	name, arch string
	memory     int64 // a budget that holds the rows in memory
	factored   bool
}{
	{"factored", "mlp:6-8-4", 4 << 10, true},
	{"full", "convnet:1x6x6-2-3", 1 << 30, false},
}

// diskModel serves testInput(b, m) with exact rows in memory (memory > 0) or forced to
// disk under dir.
func diskModel(t *testing.T, b entk.Backbone, m int, memory int64, disk *Disk) *Model {
	t.Helper()
	st := Settings{Backbone: b, H: 2, S: 16, Seed: 5, DrawName: "test/eval", ExactMemoryBytes: memory, ExactDisk: disk, Fits: 1}
	s, err := New(testInput(b, m), st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dirEntries lists dir's names.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestDiskRowsBitIdentical: a model small enough for memory, served once from memory and
// once forced to disk, has the same rows, diagonals and Gram matrix bit for bit and gives
// the same answers byte for byte (JSON of the certificates), single and batched, under
// every ranking and with a masked landmark; the disk model says "disk", the file's name
// is gone once it is mapped, and Disk.Mapped counts the mapping.
func TestDiskRowsBitIdentical(t *testing.T) {
	for _, c := range diskCases {
		t.Run(c.name, func(t *testing.T) {
			b, err := entk.NewBackbone(c.arch, 3)
			if err != nil {
				t.Fatal(err)
			}
			const m = 21 // straddles the 4-row blocks of the batched dot products
			dir := filepath.Join(t.TempDir(), "exactrows")
			disk := NewDisk(dir, 1<<30)
			mem := diskModel(t, b, m, c.memory, nil)
			dsk := diskModel(t, b, m, 1, disk)
			if mem.Exact == nil || dsk.Exact == nil || dsk.ExactRowsErr != nil {
				t.Fatalf("exact rows: memory %v, disk %v (%v)", mem.Exact != nil, dsk.Exact != nil, dsk.ExactRowsErr)
			}
			if mem.Exact.Factored() != c.factored || dsk.Exact.Factored() != c.factored {
				t.Fatalf("factored: memory %v, disk %v, want %v", mem.Exact.Factored(), dsk.Exact.Factored(), c.factored)
			}
			if _, w := mem.Variance(); w != RowsInMemory {
				t.Errorf("memory model's rows are %q", w)
			}
			if v, w := dsk.Variance(); v != certify.VarianceExactKernel || w != RowsOnDisk {
				t.Errorf("disk model: variance %q, rows %q", v, w)
			}
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Errorf("rows directory holds %v after mapping, want nothing", names)
			}
			if got, want := disk.Mapped(), int64(rowsHeader)+dsk.Exact.Bytes(); got != want {
				t.Errorf("Mapped %d bytes, want %d", got, want)
			}
			bits32 := func(v []float32) []uint32 {
				out := make([]uint32, len(v))
				for i, x := range v {
					out[i] = math.Float32bits(x)
				}
				return out
			}
			bits64 := func(v []float64) []uint64 {
				out := make([]uint64, len(v))
				for i, x := range v {
					out[i] = math.Float64bits(x)
				}
				return out
			}
			if !slices.Equal(bits32(mem.Exact.lf), bits32(dsk.Exact.lf)) || !slices.Equal(bits64(mem.Exact.diag), bits64(dsk.Exact.diag)) {
				t.Fatalf("rows or diagonals differ between memory and disk")
			}
			if !slices.Equal(bits64(mem.gram), bits64(dsk.gram)) {
				t.Fatalf("Gram matrices differ between memory and disk")
			}
			sameAnswers(t, b, mem, dsk)
			sameAnswers(t, b, mem.WithMask([]string{"p03"}), dsk.WithMask([]string{"p03"}))
		})
	}
}

// sameAnswers checks that a and b give byte-identical certificates on seeded queries,
// one at a time under every ranking and in one batch.
func sameAnswers(t *testing.T, bb entk.Backbone, a, b *Model) {
	t.Helper()
	r := rand.New(rand.NewPCG(8, 8))
	var xs [][]float64
	var ks []int
	var ds []float64
	var rs []certify.Ranking
	for i := range 9 {
		x := make([]float64, bb.InDim())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		xs, ks, ds = append(xs, x), append(ks, 1+i%5), append(ds, 0.05)
		rs = append(rs, certify.Rankings[i%len(certify.Rankings)])
	}
	js := func(c certify.Certificate, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	var wa, wb Workspace
	for i, x := range xs {
		for _, rk := range certify.Rankings {
			if rk.AllPoints() {
				continue // landmark rankings only: gradient rows have their own test
			}
			ga, gb := js(a.AnswerRanked(&wa, x, ks[i], ds[i], rk)), js(b.AnswerRanked(&wb, x, ks[i], ds[i], rk))
			if ga != gb {
				t.Fatalf("query %d, %s:\nmemory %s\ndisk   %s", i, rk, ga, gb)
			}
		}
	}
	oa, ob := make([]certify.Certificate, len(xs)), make([]certify.Certificate, len(xs))
	ea, eb := make([]error, len(xs)), make([]error, len(xs))
	a.AnswerBatch(&wa, oa, ea, xs, ks, ds, rs)
	b.AnswerBatch(&wb, ob, eb, xs, ks, ds, rs)
	for i := range xs {
		if ga, gb := js(oa[i], ea[i]), js(ob[i], eb[i]); ga != gb {
			t.Fatalf("batch query %d:\nmemory %s\ndisk   %s", i, ga, gb)
		}
	}
}

// TestDiskRowsReleased: the rows file of a served version has no name once it is
// mapped, rows files that an earlier process left in the directory are removed on first
// use (other files are not), and the mapping is released once no model of the version
// is reachable (the retired version's case).
func TestDiskRowsReleased(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "exactrows")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"v3-77-1.rows", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	disk := NewDisk(dir, 1<<30)
	func() {
		s := diskModel(t, b, 12, 1, disk)
		if s.Exact == nil || s.Exact.Where() != RowsOnDisk || disk.Mapped() == 0 {
			t.Fatalf("want disk rows, have %v (mapped %d, %v)", s.Exact != nil, disk.Mapped(), s.ExactRowsErr)
		}
		if _, err := s.Answer(new(Workspace), make([]float64, b.InDim()), 2, 0.05); err != nil {
			t.Fatal(err)
		}
		runtime.KeepAlive(s)
	}()
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("directory holds %v, want only notes.txt", names)
	}
	deadline := time.Now().Add(10 * time.Second)
	for disk.Mapped() != 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := disk.Mapped(); n != 0 {
		t.Errorf("%d bytes still mapped after the model became unreachable", n)
	}
}

// TestDiskRowsDamaged: a rows file that differs from what was written (a flipped row
// bit, another model version in the header, a truncated file) is detected by its size,
// header or CRC-32C and not used: the model answers on the sketched path with
// ErrRowsDamaged in ExactRowsErr, and the file is removed. Rows that fit neither budget,
// and a memory budget of 0 (the exact model off), leave the sketched path without error.
func TestDiskRowsDamaged(t *testing.T) {
	b, err := entk.NewBackbone("mlp:6-8-4", 3)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*os.File) error) func(string) error {
		return func(path string) error {
			fh, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			return errors.Join(f(fh), fh.Close())
		}
	}
	flip := func(off int64) func(*os.File) error {
		return func(f *os.File) error {
			var p [1]byte
			if _, err := f.ReadAt(p[:], off); err != nil {
				return err
			}
			p[0] ^= 0x10
			_, err := f.WriteAt(p[:], off)
			return err
		}
	}
	for _, c := range []struct {
		name   string
		damage func(*os.File) error
	}{
		{"row bit", flip(rowsHeader + 4*37 + 2)},
		{"checksum", flip(41)},
		{"version", func(f *os.File) error {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], 8)
			_, err := f.WriteAt(v[:], 16)
			return err
		}},
		{"truncated", func(f *os.File) error {
			st, err := f.Stat()
			if err != nil {
				return err
			}
			return f.Truncate(st.Size() - 4)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			disk := NewDisk(dir, 1<<30)
			disk.damage = edit(c.damage)
			s := diskModel(t, b, 12, 1, disk)
			if s.Exact != nil || s.Draw == nil || !errors.Is(s.ExactRowsErr, ErrRowsDamaged) {
				t.Fatalf("exact rows %v, draw %v, error %v: want the sketched path and ErrRowsDamaged", s.Exact != nil, s.Draw != nil, s.ExactRowsErr)
			}
			if names := dirEntries(t, dir); len(names) != 0 || disk.Mapped() != 0 {
				t.Errorf("after a damaged file: directory %v, %d bytes mapped", names, disk.Mapped())
			}
		})
	}
	for _, c := range []struct {
		name           string
		memory, budget int64
	}{{"over the disk budget", 1, 12*46*4 - 1}, {"exact model off", 0, 1 << 30}} {
		s := diskModel(t, b, 12, c.memory, NewDisk(t.TempDir(), c.budget))
		if s.Exact != nil || s.ExactRowsErr != nil {
			t.Errorf("%s: exact rows %v, error %v; want the sketched path without error", c.name, s.Exact != nil, s.ExactRowsErr)
		}
	}
}

// TestReseedJaccardOnDisk: the reseed stability of pools whose rows exceed the memory
// budget is measured on disk rows, bit for bit the value from memory rows (factored
// here: 4 KiB holds them), and the transient rows are unmapped and nameless when it
// returns; without a disk it is not measured.
func TestReseedJaccardOnDisk(t *testing.T) {
	s, b := testModel(t, 16, 1<<30)
	d := b.InDim()
	a := Landmarks{IDs: s.LandmarkIDs, X: s.LandmarkX}
	c := Landmarks{IDs: slices.Clone(s.LandmarkIDs), X: slices.Clone(s.LandmarkX)}
	for l := 9; l < 16; l++ { // the last 7 landmarks replaced under new ids
		c.IDs[l] = "n" + c.IDs[l]
		for j := range d {
			c.X[l*d+j] = math.Sin(float64(5*l + j))
		}
	}
	var qs [][]float64
	for i := range 6 {
		x := make([]float64, d)
		for j := range x {
			x[j] = math.Cos(float64(2*i + j))
		}
		qs = append(qs, x)
	}
	want, ok := ReseedJaccard(b, a, c, qs, 3, 4<<10)
	if !ok || want == 1 {
		t.Fatalf("memory: %v %v, want a measured value below 1", want, ok)
	}
	dir := t.TempDir()
	disk := NewDisk(dir, 1<<30)
	got, ok := ReseedJaccardOn(b, a, c, qs, nil, 3, 1, disk)
	if !ok || math.Float64bits(got) != math.Float64bits(want) {
		t.Errorf("disk: %v %v, memory %v", got, ok, want)
	}
	if names := dirEntries(t, dir); len(names) != 0 || disk.Mapped() != 0 {
		t.Errorf("after the measurement: directory %v, %d bytes mapped", names, disk.Mapped())
	}
	if _, ok := ReseedJaccardOn(b, a, c, qs, nil, 3, 1, nil); ok {
		t.Errorf("measured over the memory budget without a disk")
	}
}
