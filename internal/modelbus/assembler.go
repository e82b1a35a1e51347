package modelbus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// DefaultMaxPending bounds the bytes of incomplete versions an Assembler holds.
const DefaultMaxPending = 1 << 30

// Assembler rebuilds versions and masks from the models topic read in order, as a
// replica does. It is not safe for concurrent use.
type Assembler struct {
	// Features is the reader's pipeline fingerprint; a version fitted under another is
	// refused with ErrFeatures.
	Features string
	// MaxPending bounds the chunk bytes of incomplete versions; when a chunk would
	// exceed it, the oldest incomplete version is dropped. DefaultMaxPending when 0.
	MaxPending int

	chunks  map[uint64]map[int][]byte
	held    int
	latest  uint64
	masks   map[uint64][]string
	waiting map[uint64]Decoded // manifests whose chunks have not all arrived
	// content holds the live content pieces (KindContent) by SHA-256, in arrival order,
	// until their tombstones: a later version's index may name them again.
	content map[[32]byte][]byte
	order   [][32]byte
}

// Latest is the newest version Add has returned (0: none).
func (a *Assembler) Latest() uint64 { return a.latest }

// Add applies one message. It returns the version it completes when that version is
// newer than Latest (nil otherwise), and an error for a message that does not decode,
// a version whose checksum fails, or one fitted under another pipeline; the Assembler
// stays usable after any error.
func (a *Assembler) Add(key, value []byte) (*Version, error) {
	d, err := Decode(key, value)
	if err != nil {
		return nil, err
	}
	if a.chunks == nil {
		a.chunks, a.masks, a.waiting = map[uint64]map[int][]byte{}, map[uint64][]string{}, map[uint64]Decoded{}
		a.content = map[[32]byte][]byte{}
	}
	if IsPointKey(string(key)) {
		return nil, nil // the gradient rankings' points: not part of any version
	}
	switch d.Kind {
	case KindContent:
		return a.addContent(d)
	case KindIndex:
		if d.Version <= a.latest {
			return nil, nil
		}
		return a.completeIndex(d)
	case KindTombstone:
		switch {
		case len(key) > 2 && string(key[:2]) == "c/":
			a.dropContent(key)
		case string(key) == string(MaskKey(d.Version)):
			delete(a.masks, d.Version)
		case string(key) == string(ManifestKey(d.Version)):
			a.drop(d.Version)
		default:
			if c := a.chunks[d.Version]; c != nil {
				a.held -= len(c[d.Index])
				delete(c, d.Index)
			}
		}
		return nil, nil
	case KindMask:
		a.masks[d.Version] = d.IDs
		return nil, nil
	case KindChunk:
		if d.Version <= a.latest {
			return nil, nil
		}
		a.hold(d)
		if m, ok := a.waiting[d.Version]; ok {
			v, err := a.complete(m)
			if err != nil {
				return nil, nil // more chunks may come: only a manifest reports a mismatch
			}
			return v, nil
		}
		return nil, nil
	}
	if d.Version <= a.latest { // a manifest
		return nil, nil
	}
	return a.complete(d)
}

// hold keeps a chunk's bytes, dropping the oldest incomplete versions over MaxPending.
func (a *Assembler) hold(d Decoded) {
	limit := a.MaxPending
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	for a.held+len(d.Data) > limit && len(a.chunks) > 0 {
		oldest := slices.Min(slices.Collect(maps.Keys(a.chunks)))
		if oldest == d.Version && len(a.chunks) == 1 {
			break // the only version in flight: hold it regardless, up to one version
		}
		a.drop(oldest)
	}
	c := a.chunks[d.Version]
	if c == nil {
		c = map[int][]byte{}
		a.chunks[d.Version] = c
	}
	a.held += len(d.Data) - len(c[d.Index])
	c[d.Index] = d.Data
}

// drop forgets an incomplete version.
func (a *Assembler) drop(v uint64) {
	for _, b := range a.chunks[v] {
		a.held -= len(b)
	}
	delete(a.chunks, v)
	delete(a.waiting, v)
}

// complete assembles the version of manifest m when every chunk is there.
func (a *Assembler) complete(m Decoded) (*Version, error) {
	c := a.chunks[m.Version]
	if len(c) < m.Count {
		a.waiting[m.Version] = m
		return nil, nil
	}
	// A mismatch keeps the chunks and the manifest waiting: the leader rewrites a
	// version under the same keys (its deleted rows zeroed), and a reader may meet old
	// and new chunks side by side until the rewrite's chunks and manifest arrive.
	p := make([]byte, 0, m.Length)
	for i := range m.Count {
		b, ok := c[i]
		if !ok || len(p)+len(b) > m.Length {
			a.waiting[m.Version] = m
			return nil, fmt.Errorf("%w: version %d: chunk %d missing or too long", ErrMessage, m.Version, i)
		}
		p = append(p, b...)
	}
	if len(p) != m.Length || sha256.Sum256(p) != m.Sum {
		a.waiting[m.Version] = m
		return nil, fmt.Errorf("%w: version %d: checksum or length mismatch (%d bytes, manifest says %d)",
			ErrMessage, m.Version, len(p), m.Length)
	}
	a.drop(m.Version)
	return a.finish(m.Version, p)
}

// finish decodes the encoding p of the version manifest mv completes, checks it against
// the manifest and the reader's pipeline, and makes it the latest.
func (a *Assembler) finish(mv uint64, p []byte) (*Version, error) {
	v, err := DecodeVersion(p)
	if err != nil {
		return nil, err
	}
	if v.Version != mv {
		return nil, fmt.Errorf("%w: manifest %d holds version %d", ErrMessage, mv, v.Version)
	}
	if a.Features != "" && v.Features != a.Features {
		return nil, fmt.Errorf("%w: version %d has features %.12s…, this reader %.12s…", ErrFeatures, v.Version, v.Features, a.Features)
	}
	a.latest = v.Version
	for old := range a.chunks {
		if old < v.Version {
			a.drop(old)
		}
	}
	for old := range a.waiting {
		if old < v.Version {
			delete(a.waiting, old)
		}
	}
	return &v, nil
}

// MaskFor returns every id masked in a model of version v: the union of the masks of
// versions v and newer (package doc, "The deletion fence"), sorted.
func (a *Assembler) MaskFor(v uint64) []string {
	var ids []string
	for mv, m := range a.masks {
		if mv >= v {
			ids = append(ids, m...)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// addContent holds a content piece and completes the newest waiting index it finishes.
// Pieces are held until their tombstones; over MaxPending the oldest pieces that no
// waiting index names are dropped first.
func (a *Assembler) addContent(d Decoded) (*Version, error) {
	if _, ok := a.content[d.Sum]; !ok {
		a.content[d.Sum] = d.Data
		a.order = append(a.order, d.Sum)
		a.held += len(d.Data)
		a.trimContent()
	}
	var done *Version
	for _, v := range slices.Sorted(maps.Keys(a.waiting)) {
		m := a.waiting[v]
		if m.Kind != KindIndex || v <= a.latest || !a.hasPieces(m) {
			continue
		}
		got, err := a.completeIndex(m)
		if err != nil {
			return nil, err
		}
		if got != nil {
			done = got
		}
	}
	return done, nil
}

// hasPieces says whether every piece m names is held.
func (a *Assembler) hasPieces(m Decoded) bool {
	for _, h := range m.Pieces {
		if _, ok := a.content[h]; !ok {
			return false
		}
	}
	return true
}

// trimContent drops the oldest pieces that no waiting index names while the held
// bytes exceed MaxPending.
func (a *Assembler) trimContent() {
	limit := a.MaxPending
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	named := map[[32]byte]bool{}
	for _, m := range a.waiting {
		for _, h := range m.Pieces {
			named[h] = true
		}
	}
	kept := a.order[:0]
	for i, h := range a.order {
		if a.held > limit && !named[h] && i < len(a.order)-1 {
			a.held -= len(a.content[h])
			delete(a.content, h)
			continue
		}
		kept = append(kept, h)
	}
	a.order = kept
}

// dropContent forgets the piece of a content key's tombstone.
func (a *Assembler) dropContent(key []byte) {
	var h [32]byte
	if n, err := hex.Decode(h[:], key[2:]); err != nil || n != 32 {
		return
	}
	if b, ok := a.content[h]; ok {
		a.held -= len(b)
		delete(a.content, h)
		a.order = slices.DeleteFunc(a.order, func(x [32]byte) bool { return x == h })
	}
}

// completeIndex assembles the version of index m when every piece is held (else it
// waits for them), checks its length and SHA-256 and decodes it.
func (a *Assembler) completeIndex(m Decoded) (*Version, error) {
	if !a.hasPieces(m) {
		a.waiting[m.Version] = m
		return nil, nil
	}
	p := make([]byte, 0, m.Length)
	for _, h := range m.Pieces {
		b := a.content[h]
		if len(p)+len(b) > m.Length {
			delete(a.waiting, m.Version)
			return nil, fmt.Errorf("%w: version %d: its pieces exceed its %d bytes", ErrMessage, m.Version, m.Length)
		}
		p = append(p, b...)
	}
	delete(a.waiting, m.Version)
	if len(p) != m.Length || sha256.Sum256(p) != m.Sum {
		return nil, fmt.Errorf("%w: version %d: checksum or length mismatch (%d bytes, index says %d)",
			ErrMessage, m.Version, len(p), m.Length)
	}
	return a.finish(m.Version, p)
}
