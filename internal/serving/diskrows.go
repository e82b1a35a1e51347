package serving

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cairnhq/cairn/entk"
)

// Rows files (doc.go "Exact rows on disk"). One file holds the exact rows of one model
// version, all little-endian:
//
//	offset  size  field
//	0       8     magic "cairnxr\x00"
//	8       4     format version (rowsFormat)
//	12      4     representation: 1 full rows (entk.ExactTo), 2 factored rows (entk.Factored)
//	16      8     model version
//	24      8     rows M
//	32      8     floats per row (ExactDim or Factored.Dim)
//	40      4     CRC-32C (Castagnoli) of bytes [0, 40) followed by the rows
//	44      20    zero
//	64      4·M·dim  the rows, float32, row-major in model row order
//
// The rows start 64 bytes into a page-aligned mapping, so a row is read in place as
// []float32 (little-endian hosts only: NewDisk refuses others).
const (
	rowsMagic    = "cairnxr\x00"
	rowsFormat   = 1
	rowsHeader   = 64
	rowsFull     = 1
	rowsFactored = 2
	rowsSuffix   = ".rows"
	// rowsChunkBytes bounds the rows computed in memory before they are written: a
	// chunk holds this many bytes of rows, at least one row, and one row per core when
	// that fits four times as much.
	rowsChunkBytes = 32 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Disk is where exact rows that exceed query.exact_memory_bytes go when they fit
// Budget (query.exact_disk_bytes): a directory that only this Disk writes, in the data
// directory. It is safe for concurrent use; New (Settings.ExactDisk) is its only user.
type Disk struct {
	dir    string
	budget int64
	seq    atomic.Uint64
	mapped atomic.Int64 // bytes of rows files mapped now (Mapped)
	once   sync.Once
	err    error // from the first use: the directory could not be made
	// damage, for tests, runs on a rows file after it is written and synced and
	// before it is mapped.
	damage func(path string) error
}

// NewDisk returns the Disk of directory dir (created with mode 0700 on first use, when
// files a previous process left there are removed) and a per-version budget of budget
// bytes (≤ 0: no rows go to disk). It does no I/O.
func NewDisk(dir string, budget int64) *Disk { return &Disk{dir: dir, budget: budget} }

// Mapped is the number of bytes of rows files mapped now: rows whose model values are
// still reachable (a retired version's until the garbage collector has found it
// unreachable, doc.go "Exact rows on disk").
func (d *Disk) Mapped() int64 { return d.mapped.Load() }

// open makes the directory and removes rows files left by an earlier process (a crash
// between writing a file and removing its name), once.
func (d *Disk) open() error {
	d.once.Do(func() {
		if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
			d.err = fmt.Errorf("%w: rows files are little-endian and this host is not", ErrRowsDisk)
			return
		}
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			d.err = fmt.Errorf("%w: %w", ErrRowsDisk, err)
			return
		}
		old, err := filepath.Glob(filepath.Join(d.dir, "*"+rowsSuffix))
		for _, p := range old {
			err = errors.Join(err, os.Remove(p))
		}
		if err != nil {
			d.err = fmt.Errorf("%w: removing rows files of an earlier run: %w", ErrRowsDisk, err)
		}
	})
	return d.err
}

// rows returns the exact rows of the m landmarks xs (m×D) of model version on disk:
// factored rows when the backbone has them and they fit the budget, else full rows when
// they do, else nil (and no error). Factored rows come first because they are ~d·P/Σ(in
// + d·out) times smaller (111× for the Adult resmlp), so a query reads that much less,
// at twice the full rows' rounding radius. A failure to write, map or check the file
// (ErrRowsDisk, ErrRowsDamaged) is returned with nil rows.
func (d *Disk) rows(b entk.Backbone, xs []float64, m int, version uint64) (*ExactRows, error) {
	if d == nil || d.budget <= 0 || m == 0 {
		return nil, nil
	}
	r := &ExactRows{diag: make([]float64, m), disk: true}
	kind := uint32(rowsFull)
	rowsTo := func(dst []float32, diag, xs []float64, n int) { entk.ExactBatch32To(dst, diag, b, xs, n) }
	if f, ok := entk.NewFactored(b); ok && int64(m)*int64(f.Dim())*4 <= d.budget {
		r.fac, r.dim, kind, rowsTo = f, f.Dim(), rowsFactored, f.Batch32To
	} else if r.dim = entk.ExactDim(b); int64(m)*int64(r.dim)*4 > d.budget {
		return nil, nil
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	hdr := rowsHeaderOf(kind, version, m, r.dim)
	path, err := d.write(hdr, b.InDim(), m, r.dim, xs, r.diag, rowsTo)
	if err != nil {
		return nil, err
	}
	mp, err := d.mapChecked(path, hdr)
	if err != nil {
		return nil, err
	}
	r.lf = unsafe.Slice((*float32)(unsafe.Pointer(&mp[rowsHeader])), m*r.dim)
	d.mapped.Add(int64(len(mp)))
	r.unmap = runtime.AddCleanup(r, d.unmap, mp)
	r.release = func() {
		r.unmap.Stop()
		d.unmap(mp)
	}
	return r, nil
}

// unmap releases a mapping of a rows file (an unmap of a mapping this Disk made cannot
// fail but for a bug).
func (d *Disk) unmap(mp []byte) {
	d.mapped.Add(-int64(len(mp)))
	_ = unmap(mp)
}

// exactRowsOn returns the exact rows of the m landmarks xs: in memory when they fit
// memory bytes (NewExactRows, taking what it can of known: NewExactRowsReusing), else on
// disk when they fit its budget (Disk.rows, for model version), else nil; memory ≤ 0
// turns exact rows off, disk nil keeps them in memory.
func exactRowsOn(b entk.Backbone, xs []float64, m int, memory int64, disk *Disk, version uint64, known ...Known) (*ExactRows, error) {
	if r := NewExactRowsReusing(b, xs, m, memory, known...); r != nil || memory <= 0 {
		return r, nil
	}
	return disk.rows(b, xs, m, version)
}

// rowsHeaderOf is a rows file's header without its checksum.
func rowsHeaderOf(kind uint32, version uint64, m, dim int) []byte {
	h := make([]byte, rowsHeader)
	copy(h, rowsMagic)
	binary.LittleEndian.PutUint32(h[8:], rowsFormat)
	binary.LittleEndian.PutUint32(h[12:], kind)
	binary.LittleEndian.PutUint64(h[16:], version)
	binary.LittleEndian.PutUint64(h[24:], uint64(m))
	binary.LittleEndian.PutUint64(h[32:], uint64(dim))
	return h
}

// write computes the rows of xs (m inputs of in floats) chunk by chunk with rowsTo
// (their diagonals into diag), writes them after hdr (checksum filled in) to a new file
// in d's directory, syncs it and returns its path. On failure the file is removed.
func (d *Disk) write(hdr []byte, in, m, dim int, xs, diag []float64,
	rowsTo func(dst []float32, diag, xs []float64, n int)) (path string, err error) {
	name := "v" + strconv.FormatUint(binary.LittleEndian.Uint64(hdr[16:]), 10) + "-" + strconv.Itoa(os.Getpid()) + "-" +
		strconv.FormatUint(d.seq.Add(1), 10) + rowsSuffix
	path = filepath.Join(d.dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrRowsDisk, err)
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrRowsDisk, path, errors.Join(err, os.Remove(path)))
		}
	}()
	sum := crc32.Update(0, castagnoli, hdr[:40])
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return path, err
	}
	chunk := max(1, rowsChunkBytes/(4*dim))
	if p := runtime.GOMAXPROCS(0); chunk < p {
		chunk = max(chunk, min(p, 4*rowsChunkBytes/(4*dim))) // a row per core, up to 128 MiB
	}
	chunk = min(chunk, m)
	buf := make([]float32, chunk*dim)
	off := int64(rowsHeader)
	for i0 := 0; i0 < m; i0 += chunk {
		n := min(chunk, m-i0)
		rowsTo(buf[:n*dim], diag[i0:i0+n], xs[i0*in:(i0+n)*in], n)
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*n*dim) // little-endian host (open)
		sum = crc32.Update(sum, castagnoli, raw)
		if _, err := f.WriteAt(raw, off); err != nil {
			return path, err
		}
		off += int64(len(raw))
	}
	binary.LittleEndian.PutUint32(hdr[40:], sum)
	if _, err := f.WriteAt(hdr[40:44], 40); err != nil {
		return path, err
	}
	return path, f.Sync()
}

// mapChecked maps the rows file at path read-only, checks it against want (the header
// write made, checksum included) and its checksum against the mapped bytes, and
// removes the file's name: the mapping stays valid, the file can no longer be opened,
// and its blocks are freed when the mapping goes. A file that differs is
// ErrRowsDamaged; the file is removed whatever happens.
func (d *Disk) mapChecked(path string, want []byte) (mp []byte, err error) {
	if d.damage != nil {
		if err := d.damage(path); err != nil {
			return nil, errors.Join(err, os.Remove(path))
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRowsDisk, errors.Join(err, os.Remove(path)))
	}
	defer func() {
		err = errors.Join(err, f.Close(), os.Remove(path))
		if err != nil && mp != nil {
			err = errors.Join(err, unmap(mp))
			mp = nil
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRowsDisk, err)
	}
	m, dim := binary.LittleEndian.Uint64(want[24:]), binary.LittleEndian.Uint64(want[32:])
	if st.Size() != rowsHeader+int64(4*m*dim) {
		return nil, fmt.Errorf("%w: %s holds %d bytes, want %d", ErrRowsDamaged, path, st.Size(), rowsHeader+4*m*dim)
	}
	if mp, err = mapFile(f, int(st.Size())); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRowsDisk, err)
	}
	if string(mp[:rowsHeader]) != string(want) {
		return mp, fmt.Errorf("%w: %s: header differs from the one written", ErrRowsDamaged, path)
	}
	sum := crc32.Update(crc32.Update(0, castagnoli, mp[:40]), castagnoli, mp[rowsHeader:])
	if got := binary.LittleEndian.Uint32(mp[40:]); got != sum {
		return mp, fmt.Errorf("%w: %s: checksum %08x, rows give %08x", ErrRowsDamaged, path, got, sum)
	}
	return mp, nil
}
