package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Slot files keep the points' raw inputs out of bbolt (FORMAT.md "Slots"). bbolt is
// copy-on-write and never zeroes a freed page, so a deleted value stays readable in
// the file until a full rewrite (Compact); with the inputs in files of their own, a
// deletion punches its input out of one file and bbolt's pages hold no input at all.
// So a deletion writes O(input + one leaf page) bytes and needs no free space beyond
// that, whatever the size of the store.
//
// Slots are numbered: ids are allocated from the meta key slot_last and never reused.
// The slots one transaction writes share one segment file, DIR/<first id> (DIR = the
// state file's path + ".slots", the name 16 hex digits), each at an offset that is a
// multiple of slotAlign, holding x as little-endian float64s. One file per batch
// rather than one per point: creating a file and syncing its directory entry cost
// about 0.5 ms of kernel time each on ext4 (measured), which was most of the ingest's
// serial time. The point's value records the slot id, the length and the CRC-32C of
// the content, and (format 8) the segment and the offset; a format 4–7 slot is a
// segment of its own at offset 0. Segments are written and synced (one syncfs of the
// directory's file system) before the transaction that references them commits.
// A slot is erased after the transaction that drops its reference commits: its
// aligned range is punched out of the segment (FALLOC_FL_PUNCH_HOLE; zeros written
// where the file system cannot punch), the segment synced, and unlinked once no data
// is left in it. The transaction that drops slots also records where they are in the
// meta key slots_dropped, cleared once they are erased, so that after a crash Open
// erases exactly those, and the segments of a transaction that did not commit (named
// above slot_last), without reading the points: a damaged page can hide a point, and
// a scan would take its slot for an orphan.

// slotAlign is the alignment of a slot in its segment: a file system block, so that
// punching a slot out frees its blocks and never touches a neighbour's.
const slotAlign = 4096

// slotRef is a point value's reference to its slot.
type slotRef struct {
	id  uint64
	n   uint32 // bytes: 8·len(x)
	crc uint32 // CRC-32C of the content
	seg uint64 // the segment file's id (its first slot's id)
	off uint64 // byte offset in the segment, a multiple of slotAlign
}

// slotHole is where a dropped slot is (meta slots_dropped): its segment and aligned
// range; n = 0 means the whole segment (a format 4–7 slot, or an uncommitted segment).
type slotHole struct {
	seg, off, n uint64
}

// hole is where ref's content is, aligned up to whole blocks.
func (r slotRef) hole() slotHole {
	return slotHole{seg: r.seg, off: r.off, n: alignUp(uint64(r.n))}
}

func alignUp(n uint64) uint64 { return (n + slotAlign - 1) / slotAlign * slotAlign }

// segmentWriter appends the slots of one transaction to its segment file.
type segmentWriter struct {
	f   *os.File
	id  uint64 // the segment's id
	off uint64 // where the next slot goes
}

var (
	metaSlotLast    = []byte("slot_last")
	metaSlotDropped = []byte("slots_dropped")
)

// slotsDir is the slot directory of the state file at path.
func slotsDir(path string) string { return path + ".slots" }

func slotName(id uint64) string { return fmt.Sprintf("%016x", id) }

// slotBytes is x as the content of a slot.
func slotBytes(x []float64) []byte {
	b := make([]byte, 8*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// write appends x as slot id to the segment, creating the segment (named id) on its
// first slot (not synced: syncSlots does that for a transaction).
func (w *segmentWriter) write(dir string, id uint64, x []float64) (slotRef, error) {
	b := slotBytes(x)
	if w.f == nil {
		f, err := os.OpenFile(filepath.Join(dir, slotName(id)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return slotRef{}, fmt.Errorf("storage: create slot segment %d: %w", id, err)
		}
		w.f, w.id, w.off = f, id, 0
	}
	if _, err := w.f.WriteAt(b, int64(w.off)); err != nil {
		return slotRef{}, fmt.Errorf("storage: write slot %d: %w", id, err)
	}
	ref := slotRef{id: id, n: uint32(len(b)), crc: crc32.Checksum(b, castagnoli), seg: w.id, off: w.off}
	w.off += alignUp(uint64(len(b)))
	return ref, nil
}

// close closes the segment file, if one was created.
func (w *segmentWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("storage: close slot segment %d: %w", w.id, err)
	}
	return nil
}

// readSlot reads the input of ref, checking its length and CRC.
func readSlot(dir string, ref slotRef) ([]float64, string) {
	f, err := os.Open(filepath.Join(dir, slotName(ref.seg)))
	if err != nil {
		return nil, fmt.Sprintf("slot %s: %v", slotName(ref.id), err)
	}
	defer f.Close()
	if ref.n%8 != 0 {
		return nil, fmt.Sprintf("slot %s: length %d is not a whole number of float64s", slotName(ref.id), ref.n)
	}
	b := make([]byte, ref.n)
	if got, err := f.ReadAt(b, int64(ref.off)); got != len(b) {
		return nil, fmt.Sprintf("slot %s holds %d bytes at offset %d of segment %s, the point says %d (%v)",
			slotName(ref.id), got, ref.off, slotName(ref.seg), ref.n, err)
	}
	if crc32.Checksum(b, castagnoli) != ref.crc {
		return nil, fmt.Sprintf("slot %s fails its CRC", slotName(ref.id))
	}
	x := make([]float64, len(b)/8)
	for i := range x {
		x[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return x, ""
}

// syncSlots makes the slot files written so far durable, and their directory entries:
// one syncfs of the directory's file system instead of one fsync per file.
func syncSlots(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: sync slots: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("storage: sync slots: %w", err)
	}
	return nil
}

// eraseSlots erases the holes: each slot's range is punched out of its segment (or
// overwritten with zeros where the file system cannot punch), a whole-segment hole
// zeroes the segment; each touched segment is synced, and unlinked once it holds no
// data; then the directory is synced. A segment that is already gone is skipped.
func eraseSlots(dir string, holes []slotHole) error {
	if len(holes) == 0 {
		return nil
	}
	bySeg := map[uint64][]slotHole{}
	var segs []uint64
	for _, h := range holes {
		if _, ok := bySeg[h.seg]; !ok {
			segs = append(segs, h.seg)
		}
		bySeg[h.seg] = append(bySeg[h.seg], h)
	}
	slices.Sort(segs)
	var errs []error
	var gone []uint64
	for _, seg := range segs {
		empty, err := eraseInSegment(filepath.Join(dir, slotName(seg)), bySeg[seg])
		if err != nil {
			errs = append(errs, err)
		} else if empty {
			gone = append(gone, seg)
		}
	}
	for _, seg := range gone {
		if err := os.Remove(filepath.Join(dir, slotName(seg))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(gone) > 0 {
		errs = append(errs, syncDir(dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: erase slots: %w", err)
	}
	return nil
}

// eraseInSegment punches the holes out of the segment at path and syncs it; empty
// reports whether no data is left in it (so it can be unlinked). A missing segment
// is empty.
func eraseInSegment(path string, holes []slotHole) (empty bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	for _, h := range holes {
		if h.n == 0 {
			if err := zeroFile(f); err != nil {
				return false, err
			}
			return true, nil
		}
		if err := punch(f, int64(h.off), int64(h.n)); err != nil {
			return false, err
		}
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	return noData(f)
}

// punch removes [off, off+n) from f: the file system deallocates the range, and reads
// of it return zeros. Where punching is not supported, the range is overwritten with
// zeros instead (f.Sync follows either way).
func punch(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("punch slot at %d: %w", off, err)
	}
	st, serr := f.Stat()
	if serr != nil {
		return serr
	}
	n = max(0, min(n, st.Size()-off))
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		return fmt.Errorf("overwrite slot at %d: %w", off, err)
	}
	return nil
}

// noData reports whether f holds no data, only holes (or nothing). Without SEEK_DATA
// support a file counts as holding data, and stays.
func noData(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err == nil, err
	}
	_, err = unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return true, nil
	}
	return false, nil
}

// slotFiles lists the slot ids present in dir, and the names there that are not slots.
func slotFiles(dir string) (ids []uint64, strays []string, err error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range es {
		id, perr := strconv.ParseUint(e.Name(), 16, 64)
		if perr != nil || len(e.Name()) != 16 || e.IsDir() {
			strays = append(strays, e.Name())
			continue
		}
		ids = append(ids, id)
	}
	return ids, strays, nil
}
