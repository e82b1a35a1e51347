package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var update = flag.Bool("update", false, "rewrite the damaged-file corpus in testdata/damaged and its expected outcomes")

// damagedDir holds the corpus: base.db, a healthy store with branch and leaf pages,
// and one damaged copy of it per entry of damages, with expected.json recording what
// opening, checking and reading each one gives. `go test ./storage -run
// TestDamagedFiles -update` rewrites them (review the diff of expected.json).
const damagedDir = "testdata/damaged"

// outcome classifies what a call gave: "ok", "damaged" (ErrDamaged), "unknown_format"
// (ErrUnknownFormat), "corrupt" (ErrCorrupt), "audit_broken" or "other".
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrDamaged):
		return "damaged"
	case errors.Is(err, ErrUnknownFormat):
		return "unknown_format"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, ErrAuditBroken):
		return "audit_broken"
	}
	return "other"
}

// damageResult is one corpus file's expected (and measured) behaviour.
type damageResult struct {
	What string `json:"what"`
	// Open is Open's outcome and OpenError its message; Check is CheckFile's outcome
	// ("problems" when it ran and found some) and CheckFirst its first problem; Read
	// is the outcome of reading every record through the API after a successful Open.
	Open       string `json:"open"`
	OpenError  string `json:"open_error,omitempty"`
	Check      string `json:"check"`
	CheckFirst string `json:"check_first,omitempty"`
	Read       string `json:"read"`
}

// boltPage is a page header in a file image (bbolt internal/common/page.go).
func boltPage(img []byte, id uint64) (flags uint16, count uint16) {
	off := id * 4096
	return binary.LittleEndian.Uint16(img[off+8:]), binary.LittleEndian.Uint16(img[off+10:])
}

// layout is where the damages aim in base.db: the points bucket's root (a branch
// page), its first and last leaf children, and the freelist page.
type layout struct {
	branch, leaf, lastLeaf, freelist uint64
}

func baseLayout(t *testing.T, path string, img []byte) layout {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var l layout
	if err := db.View(func(tx *bolt.Tx) error {
		l.branch = uint64(tx.Bucket(bucketPoints).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if flags, n := boltPage(img, l.branch); flags != 0x01 || n < 2 {
		t.Fatalf("points root page %d has flags %#x and %d elements, want a branch page", l.branch, flags, n)
	}
	// Branch elements follow the 16-byte header: pos, ksize (u32) and the child pgid.
	_, n := boltPage(img, l.branch)
	child := func(i int) uint64 { return binary.LittleEndian.Uint64(img[l.branch*4096+16+uint64(i)*16+8:]) }
	l.leaf, l.lastLeaf = child(0), child(int(n)-1)
	// The freelist pgid of the meta page with the larger txid (meta.go field order).
	m0, m1 := img[16:], img[4096+16:]
	m := m0
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) {
		m = m1
	}
	l.freelist = binary.LittleEndian.Uint64(m[32:])
	return l
}

// damages are the corpus: each returns a damaged copy of the base image.
var damages = []struct {
	name, what string
	do         func(img []byte, l layout) []byte
}{
	{"meta0-bitflip", "one bit of meta page 0 flipped (its checksum fails; bbolt uses meta page 1)",
		func(img []byte, l layout) []byte { img[16+40] ^= 0x04; return img }},
	{"meta-both-bitflip", "one bit flipped in both meta pages",
		func(img []byte, l layout) []byte { img[16+40] ^= 0x04; img[4096+16+40] ^= 0x04; return img }},
	{"meta-both-zeroed", "both meta pages zeroed",
		func(img []byte, l layout) []byte { clear(img[:8192]); return img }},
	{"truncated-half", "the file cut to half its length",
		func(img []byte, l layout) []byte { return img[:len(img)/2] }},
	{"truncated-last-page", "the last page cut off",
		func(img []byte, l layout) []byte { return img[:len(img)-4096] }},
	{"truncated-one-page", "the file cut to its first page",
		func(img []byte, l layout) []byte { return img[:4096] }},
	{"branch-flags", "the points bucket's branch page marked as a leaf page",
		func(img []byte, l layout) []byte { img[l.branch*4096+8] = 0x02; return img }},
	{"branch-child-pointer", "a child pointer of the points bucket's branch page redirected to another leaf",
		func(img []byte, l layout) []byte {
			binary.LittleEndian.PutUint64(img[l.branch*4096+16+8:], l.lastLeaf)
			return img
		}},
	{"branch-zeroed", "the points bucket's branch page zeroed",
		func(img []byte, l layout) []byte { clear(img[l.branch*4096 : (l.branch+1)*4096]); return img }},
	{"leaf-zeroed", "a leaf page of the points bucket zeroed",
		func(img []byte, l layout) []byte { clear(img[l.leaf*4096 : (l.leaf+1)*4096]); return img }},
	{"leaf-value-bitflip", "one bit flipped inside the first value of a points leaf page",
		func(img []byte, l layout) []byte {
			// Leaf elements follow the header: flags, pos, ksize, vsize (u32); pos counts
			// from the element itself.
			e := l.leaf*4096 + 16
			pos, ksize, vsize := binary.LittleEndian.Uint32(img[e+4:]), binary.LittleEndian.Uint32(img[e+8:]), binary.LittleEndian.Uint32(img[e+12:])
			img[e+uint64(pos+ksize+vsize/2)] ^= 0x10
			return img
		}},
	{"leaf-count", "a points leaf page's element count set to 65535",
		func(img []byte, l layout) []byte {
			binary.LittleEndian.PutUint16(img[l.leaf*4096+10:], 0xffff)
			return img
		}},
	{"freelist-zeroed", "the freelist page zeroed",
		func(img []byte, l layout) []byte { clear(img[l.freelist*4096 : (l.freelist+1)*4096]); return img }},
}

// writeDamageBase writes base.db: 160 points of 8 inputs (a branch page over a few
// leaves), offsets, a pool state and records, a model, pending deletions and a
// two-record audit chain with its outbox events, all seeded.
func writeDamageBase(t *testing.T, path string) {
	t.Helper()
	s, err := Open(path, Options{InitialMmapSize: 32 << 10, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 3))
	err = s.Apply(func(tx *Tx) error {
		for i := range 160 {
			x := make([]float64, 8)
			for j := range x {
				x[j] = r.NormFloat64()
			}
			id := fmt.Sprintf("p%04d", i)
			if err := tx.PutPoint(Point{ID: id, X: x, HasLabel: true, Label: int64(i % 10)}); err != nil {
				return err
			}
			if err := tx.PutPoolPoint(id, []byte{byte(i), 1, 2, 3}); err != nil {
				return err
			}
		}
		for p := range int32(3) {
			if err := tx.SetOffset("t.train", p, int64(100*p+99)); err != nil {
				return err
			}
		}
		if err := tx.PutPoolState(PoolState{Schema: 3, Data: []byte("pool core")}); err != nil {
			return err
		}
		if err := tx.PutModel(Model{Version: 1, Landmarks: []string{"p0001", "p0002"},
			A: Matrix{Rows: 2, Cols: 1, Data: []float64{1, 2}}, A0: Matrix{Rows: 2, Cols: 1, Data: []float64{3, 4}},
			B: Matrix{Rows: 1, Cols: 1, Data: []float64{5}}, Meta: []byte(`{"loss":"bt"}`)}); err != nil {
			return err
		}
		for seq := range uint64(2) {
			if err := tx.PutPending(seq+1, []byte(`{"id":"gone"}`)); err != nil {
				return err
			}
			if _, err := tx.AppendAudit([]byte(fmt.Sprintf(`{"audit":%d}`, seq))); err != nil {
				return err
			}
			if _, err := tx.Enqueue("t.audits", []byte("k"), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(err, s.Close()); err != nil {
		t.Fatal(err)
	}
	// bbolt grows a file ahead of its high-water mark; cut it there (pgid × page
	// size, from the newer meta page) so the corpus carries no unused tail.
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, m1 := img[16:], img[4096+16:]
	m := m0
	if binary.LittleEndian.Uint64(m1[48:]) > binary.LittleEndian.Uint64(m0[48:]) {
		m = m1
	}
	if err := os.Truncate(path, int64(binary.LittleEndian.Uint64(m[40:]))*4096); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every record of s through the API.
func readAll(s *Store) error {
	if err := s.View(func(tx *ReadTx) error {
		if err := tx.ForEachPoint(func(Point) error { return nil }); err != nil {
			return err
		}
		if err := tx.ForEachPoolPoint(func(string, []byte) error { return nil }); err != nil {
			return err
		}
		if _, _, err := tx.PoolState(); err != nil {
			return err
		}
		if _, err := tx.Offsets(); err != nil {
			return err
		}
		if _, _, err := tx.LatestModel(); err != nil {
			return err
		}
		return tx.ForEachPending(func(uint64, []byte) error { return nil })
	}); err != nil {
		return err
	}
	if _, err := s.Pending(100); err != nil {
		return err
	}
	return s.VerifyAudit()
}

// tryDamaged opens, reads and checks a copy of the corpus file name.
func tryDamaged(t *testing.T, name string) damageResult {
	t.Helper()
	img, err := os.ReadFile(filepath.Join(damagedDir, name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	copySlots(t, filepath.Join(damagedDir, "base.db.slots"), slotsDir(path))
	var res damageResult
	rep, err := CheckFile(path, Options{})
	switch {
	case err != nil:
		res.Check = outcome(err)
	case rep.OK:
		res.Check = "ok"
	default:
		res.Check, res.CheckFirst = "problems", rep.Problems[0]
	}
	s, err := Open(path, Options{})
	res.Open = outcome(err)
	if err != nil {
		res.OpenError = strings.ReplaceAll(err.Error(), path, name+".db")
		res.Read = "not opened"
		return res
	}
	res.Read = outcome(readAll(s))
	if err := s.Close(); err != nil && res.Read == "ok" {
		res.Read = "close: " + outcome(err)
	}
	return res
}

// TestDamagedFiles: no damaged file makes the process panic or raise SIGBUS. Each
// corpus file gives the outcome expected.json records for Open, CheckFile and a read
// of every record; where the open error is recorded, its message too (the file name
// in place of the temporary path). Every file that opens but was damaged in a page
// holding data is caught by CheckFile.
func TestDamagedFiles(t *testing.T) {
	if *update {
		regenerateDamaged(t)
	}
	b, err := os.ReadFile(filepath.Join(damagedDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]damageResult
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(damages)+1 {
		t.Errorf("expected.json has %d files, want %d (base and every damage)", len(want), len(damages)+1)
	}
	if got := tryDamaged(t, "base"); got.Open != "ok" || got.Check != "ok" || got.Read != "ok" {
		t.Fatalf("base.db: %+v, want a healthy store", got)
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			got := tryDamaged(t, d.name)
			got.What = d.what
			if got != want[d.name] {
				t.Errorf("got  %+v\nwant %+v", got, want[d.name])
			}
			if got.Open == "ok" && got.Check == "ok" && d.name != "meta0-bitflip" {
				t.Errorf("a damaged file opens and passes the check")
			}
		})
	}
}

// regenerateDamaged rewrites the corpus and expected.json from what this build does.
func regenerateDamaged(t *testing.T) {
	if err := os.MkdirAll(damagedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(damagedDir, "base.db")
	if err := os.Remove(base); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.RemoveAll(slotsDir(base)); err != nil {
		t.Fatal(err)
	}
	writeDamageBase(t, base)
	img, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	l := baseLayout(t, base, img)
	t.Logf("base.db: %d bytes, points branch page %d, leaves %d … %d, freelist page %d", len(img), l.branch, l.leaf, l.lastLeaf, l.freelist)
	results := map[string]damageResult{"base": {What: "the healthy store every damage starts from"}}
	for _, d := range damages {
		out := d.do(append([]byte(nil), img...), l)
		if err := os.WriteFile(filepath.Join(damagedDir, d.name+".db"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range damages {
		r := tryDamaged(t, d.name)
		r.What = d.what
		results[d.name] = r
	}
	r := tryDamaged(t, "base")
	r.What = results["base"].What
	results["base"] = r
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(damagedDir, "expected.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCallerPanicsPropagate: a panic of the caller's own code inside View or Apply is
// not mistaken for damage; it reaches the caller as a panic, and the store stays usable.
func TestCallerPanicsPropagate(t *testing.T) {
	s, _ := openTemp(t)
	for name, fn := range map[string]func(){
		"string": func() { panic("caller bug") },
		"index":  func() { var a []int; _ = a[len(a)+1] },
		"nil":    func() { var p *Point; _ = p.ID },
	} {
		t.Run(name, func(t *testing.T) {
			for _, call := range []func() error{
				func() error { return s.View(func(*ReadTx) error { fn(); return nil }) },
				func() error { return s.Apply(func(*Tx) error { fn(); return nil }) },
			} {
				func() {
					defer func() {
						if r := recover(); r == nil {
							t.Errorf("no panic reached the caller")
						}
					}()
					err := call()
					t.Errorf("returned %v instead of panicking", err)
				}()
			}
		})
	}
	if err := s.Apply(func(tx *Tx) error { return tx.PutPoint(Point{ID: "a", X: []float64{1}}) }); err != nil {
		t.Fatalf("store unusable after the panics: %v", err)
	}
}

// TestOpenCheck: Options.Check refuses a file whose pages are damaged even where
// reading it would not notice (a redirected child pointer reads records, the wrong
// ones), and passes the healthy base.
func TestOpenCheck(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "new.db"), Options{Check: true})
	if err != nil {
		t.Fatalf("a new file with Check: %v", err)
	}
	s.Close()
	for _, c := range []struct {
		name string
		want error
	}{{"base", nil}, {"branch-child-pointer", ErrDamaged}, {"leaf-value-bitflip", ErrDamaged}} {
		img, err := os.ReadFile(filepath.Join(damagedDir, c.name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "s.db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		copySlots(t, filepath.Join(damagedDir, "base.db.slots"), slotsDir(path))
		s, err := Open(path, Options{Check: true})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Open with Check: %v, want %v", c.name, err, c.want)
		}
		if err == nil {
			s.Close()
		} else if !strings.Contains(err.Error(), "cairnctl check") {
			t.Errorf("%s: %v does not say how to list the problems", c.name, err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(img) && c.want != nil {
			t.Errorf("%s: a refused file was modified", c.name)
		}
	}
}

// TestReadOnly: a read-only store reads, refuses writes, and a file a read-write
// store holds cannot be opened read-only until it is closed.
func TestReadOnly(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Apply(func(tx *Tx) error { return tx.PutPoint(Point{ID: "a", X: []float64{1}}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckFile(path, Options{LockTimeout: 100 * time.Millisecond}); err == nil {
		t.Errorf("CheckFile of a file held by an open store succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.View(func(tx *ReadTx) error {
		_, ok, err := tx.Point("a")
		if !ok {
			return errors.New("point a missing")
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	if err := r.Apply(func(tx *Tx) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("Apply on a read-only store: %v, want ErrInvalid", err)
	}
	if err := r.Compact(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Compact on a read-only store: %v, want ErrInvalid", err)
	}
	rep, err := r.Check()
	if err != nil || !rep.OK || rep.Keys["points"] != 1 || rep.Format != FormatVersion {
		t.Errorf("Check: %+v, %v; want OK with 1 point at format %d", rep, err, FormatVersion)
	}
}

// copySlots copies the slot files of the corpus's base (every damaged copy shares them:
// the damages are to the bbolt file).
func copySlots(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
