package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Slot files keep the points' raw inputs out of bbolt (FORMAT.md "Slots"). bbolt is
// copy-on-write and never zeroes a freed page, so a deleted value stays readable in
// the file until a full rewrite (Compact); with the inputs in files of their own, a
// deletion zeroes and unlinks one file and bbolt's pages hold no input at all. So a
// deletion writes O(input + one leaf page) bytes and needs no free space beyond that,
// whatever the size of the store.
//
// The slot of a point is the file DIR/<id>, DIR = the state file's path + ".slots", id
// a 16-hex-digit number allocated from the meta key slot_last; it holds x as
// little-endian float64s and nothing else. The point's value records the slot id, the
// length and the CRC-32C of that content. Slots are written and synced (one syncfs of
// the directory's file system) before the transaction that references them commits,
// and erased (zeroed, synced, unlinked) after the transaction that drops the reference
// commits. The transaction that drops slots also records their ids in the meta key
// slots_dropped, cleared once they are erased, so that after a crash Open erases
// exactly those, and the slots of a transaction that did not commit (ids above
// slot_last), without reading the points: a damaged page can hide a point, and a scan
// would take its slot for an orphan.

// slotRef is a point value's reference to its slot.
type slotRef struct {
	id  uint64
	n   uint32 // bytes: 8·len(x)
	crc uint32 // CRC-32C of the content
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

// writeSlot creates slot id with x (not synced: syncSlots does that for a batch).
func writeSlot(dir string, id uint64, x []float64) (slotRef, error) {
	b := slotBytes(x)
	f, err := os.OpenFile(filepath.Join(dir, slotName(id)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return slotRef{}, fmt.Errorf("storage: create slot %d: %w", id, err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		return slotRef{}, fmt.Errorf("storage: write slot %d: %w", id, err)
	}
	return slotRef{id: id, n: uint32(len(b)), crc: crc32.Checksum(b, castagnoli)}, nil
}

// readSlot reads the input of ref, checking its length and CRC.
func readSlot(dir string, ref slotRef) ([]float64, string) {
	b, err := os.ReadFile(filepath.Join(dir, slotName(ref.id)))
	if err != nil {
		return nil, fmt.Sprintf("slot %s: %v", slotName(ref.id), err)
	}
	if uint32(len(b)) != ref.n || len(b)%8 != 0 {
		return nil, fmt.Sprintf("slot %s holds %d bytes, the point says %d", slotName(ref.id), len(b), ref.n)
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

// eraseSlots overwrites the slots with zeros, syncs, unlinks them and syncs the
// directory. A slot that is already gone is skipped.
func eraseSlots(dir string, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	var errs []error
	for _, id := range ids {
		f, err := os.OpenFile(filepath.Join(dir, slotName(id)), os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, zeroFile(f), f.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: erase slots: %w", err)
	}
	for _, id := range ids {
		if err := os.Remove(filepath.Join(dir, slotName(id))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, syncDir(dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: erase slots: %w", err)
	}
	return nil
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
