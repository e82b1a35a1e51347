package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FormatVersion is the file format version this package writes and reads
// (FORMAT.md). Open migrates a file of an older version listed in migrations;
// any other version fails with *FormatError.
const FormatVersion = 8

// MaxIDLen is the longest point id, in bytes, that the store accepts.
const MaxIDLen = 1024

// MaxTopicLen is the longest topic name accepted (Kafka's own limit).
const MaxTopicLen = 249

// MaxPendingLen is the longest pending deletion audit body, in bytes, that
// Tx.PutPending accepts. A pending body is one audit before it is emitted;
// 1 MiB is far above any audit and bounds what one value adds to a commit. The
// event built from it must still fit the broker's message size limit (Kafka's
// default is about 1 MB), which is the caller's concern.
const MaxPendingLen = 1 << 20

// MaxPoolPointLen is the longest per-point pool record, in bytes, that
// Tx.PutPoolPoint accepts. The daemon's record is 32 bytes (two views' diagonal
// and residual); the limit leaves room for a later layout and bounds what a
// hostile file can make a reader allocate per key.
const MaxPoolPointLen = 256

// Defaults for Options fields left zero.
const (
	DefaultInitialMmapSize = 1 << 30 // 1 GiB of address space, not of disk
	DefaultLockTimeout     = 5 * time.Second
	// compactTxMaxSize bounds one transaction of the copy in Compact, so that
	// compaction of a large file does not hold all dirty pages in memory.
	compactTxMaxSize = 64 << 20
)

// Bucket names (FORMAT.md, "Buckets").
var (
	bucketMeta     = []byte("meta")
	bucketPoints   = []byte("points")
	bucketPool     = []byte("pool")
	bucketModels   = []byte("models")
	bucketFitStats = []byte("fitstats")
	bucketOffsets  = []byte("offsets")
	bucketOutbox   = []byte("outbox")
	bucketAudit    = []byte("audit")
	bucketPending  = []byte("pending")    // since format version 2
	bucketPoolPts  = []byte("poolpoints") // since format version 3
	bucketDeleted  = []byte("deleted")    // since format version 5

	// v1Buckets are the buckets of a format version 1 file.
	v1Buckets = [][]byte{bucketMeta, bucketPoints, bucketPool, bucketModels,
		bucketFitStats, bucketOffsets, bucketOutbox, bucketAudit}
	// v2Buckets are the buckets of a format version 2 file.
	v2Buckets = append(v1Buckets[:len(v1Buckets):len(v1Buckets)], bucketPending)
	// v3Buckets are the buckets of a format version 3 or 4 file.
	v3Buckets = append(v2Buckets[:len(v2Buckets):len(v2Buckets)], bucketPoolPts)
	// v5Buckets are the buckets of a format version 5 file.
	v5Buckets = append(v3Buckets[:len(v3Buckets):len(v3Buckets)], bucketDeleted)
	// allBuckets are the buckets of a file of FormatVersion.
	allBuckets = append(v5Buckets[:len(v5Buckets):len(v5Buckets)], bucketSubjects, bucketPointSubj, bucketBlocked)

	// formatBuckets[v] are the buckets every valid file of version v has.
	formatBuckets = [FormatVersion + 1][][]byte{1: v1Buckets, 2: v2Buckets, 3: v3Buckets, 4: v3Buckets, 5: v5Buckets, 6: allBuckets, 7: allBuckets, 8: allBuckets}
)

// migrations[v] upgrades a file of format version v to v+1 inside the opening
// transaction, after the caller checked that every bucket of version v exists.
// It must not touch format_version (migrateFormat writes it). An entry is nil
// for versions that cannot be migrated (0 never existed).
var migrations = [FormatVersion]func(path string, tx *bolt.Tx) error{
	1: migrate1to2,
	2: migrate2to3,
	3: migrate3to4,
	4: migrate4to5,
	5: migrate5to6,
	6: migrate6to7,
	7: migrate7to8,
}

// migrate7to8 rewrites slots_dropped from slot ids into holes (FORMAT.md, "Slots"):
// a format 7 slot is a segment of its own, so each id becomes the whole segment
// (offset 0, length 0). Points keep their values: a slot reference without
// segment and offset reads as its own segment at offset 0.
func migrate7to8(path string, tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(metaSlotDropped)
	if v == nil {
		return nil
	}
	ids, why := decodeMetaU64s(metaSlotDropped, v)
	if why != "" {
		return &FormatError{Path: path, Got: 7, Want: FormatVersion, Reason: "slots_dropped: " + why}
	}
	holes := make([]slotHole, len(ids))
	for i, id := range ids {
		holes[i] = slotHole{seg: id}
	}
	return meta.Put(metaSlotDropped, encodeHoles(metaSlotDropped, holes))
}

// migrate1to2 adds the pending bucket (FORMAT.md, "Migrations").
func migrate1to2(path string, tx *bolt.Tx) error {
	// A version 1 file never has it; finding one means someone else wrote
	// the file, and silently adopting its contents would be wrong.
	if tx.Bucket(bucketPending) != nil {
		return &FormatError{Path: path, Got: 1, Want: FormatVersion, Reason: fmt.Sprintf("version 1 file already has bucket %q", bucketPending)}
	}
	if _, err := tx.CreateBucket(bucketPending); err != nil {
		return fmt.Errorf("storage: migrate %s to format 2: create bucket %q: %w", path, bucketPending, err)
	}
	return nil
}

// migrate2to3 adds the poolpoints bucket, empty (FORMAT.md, "Migrations"). The
// pool blob stays as its writer left it: the daemon reads its old schema (which
// held the per-point records inside the blob) and moves the records into the new
// bucket itself.
func migrate2to3(path string, tx *bolt.Tx) error {
	if tx.Bucket(bucketPoolPts) != nil {
		return &FormatError{Path: path, Got: 2, Want: FormatVersion, Reason: fmt.Sprintf("version 2 file already has bucket %q", bucketPoolPts)}
	}
	if _, err := tx.CreateBucket(bucketPoolPts); err != nil {
		return fmt.Errorf("storage: migrate %s to format 3: create bucket %q: %w", path, bucketPoolPts, err)
	}
	return nil
}

// migrate3to4 moves every point's input out of its value into a slot file (slots.go,
// FORMAT.md "Slots"). The old values' bytes stay on bbolt's freed pages until the
// Compact that Open runs after a migration from format 3 or earlier.
func migrate3to4(path string, tx *bolt.Tx) error {
	dir := slotsDir(path)
	meta, points := tx.Bucket(bucketMeta), tx.Bucket(bucketPoints)
	last, why := uint64(0), ""
	if v := meta.Get(metaSlotLast); v != nil {
		if last, why = decodeMetaU64(metaSlotLast, v); why != "" {
			return &FormatError{Path: path, Got: 3, Want: FormatVersion, Reason: "slot_last: " + why}
		}
	}
	type moved struct {
		k, v []byte
	}
	var out []moved
	var seg segmentWriter
	err := points.ForEach(func(k, v []byte) error {
		p, ref, why := decodePoint(k, v)
		if why != "" {
			return corrupt(bucketPoints, k, why)
		}
		if ref != nil {
			return nil
		}
		last++
		r, err := seg.write(dir, last, p.X)
		if err != nil {
			return err
		}
		k = bytes.Clone(k)
		out = append(out, moved{k, encodePoint(k, &p, &r)})
		return nil
	})
	if err = errors.Join(err, seg.close()); err != nil {
		return fmt.Errorf("storage: migrate %s to format 4: %w", path, err)
	}
	for _, m := range out {
		if err := points.Put(m.k, m.v); err != nil {
			return fmt.Errorf("storage: migrate %s to format 4: %w", path, err)
		}
	}
	if err := meta.Put(metaSlotLast, encodeMetaU64(metaSlotLast, last)); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	return syncSlots(dir)
}

// migrate4to5 adds the deleted bucket, empty (FORMAT.md, "Migrations"). Points keep
// their values: one without a version reads as Version -1.
func migrate4to5(path string, tx *bolt.Tx) error {
	if tx.Bucket(bucketDeleted) != nil {
		return &FormatError{Path: path, Got: 4, Want: FormatVersion, Reason: fmt.Sprintf("version 4 file already has bucket %q", bucketDeleted)}
	}
	if _, err := tx.CreateBucket(bucketDeleted); err != nil {
		return fmt.Errorf("storage: migrate %s to format 5: create bucket %q: %w", path, bucketDeleted, err)
	}
	return nil
}

// Keys of the meta bucket and of the pool bucket.
var (
	metaFormat     = []byte("format_version")
	metaOutboxSeq  = []byte("outbox_last_seq")
	metaScrubHold  = []byte("scrub_hold_seq")
	metaPointCount = []byte("point_count")
	poolStateKey   = []byte("state")
)

// Options configure Open. The zero value is valid.
type Options struct {
	// NoSync skips fsync on commit. Default false: every Apply is durable when it
	// returns. Setting it breaks the offsets-with-state guarantee across power
	// loss; it exists for tests and benchmarks of the non-I/O cost.
	NoSync bool
	// InitialMmapSize is the initial size of the read-only memory map. bbolt
	// must remap to grow the file, and a remap waits for every open read
	// transaction; a map larger than the file means long reads (Compact,
	// ForEachPoint) do not block writers until the file outgrows it. It costs
	// address space, not memory or disk. Zero means DefaultInitialMmapSize.
	InitialMmapSize int
	// LockTimeout bounds the wait for the file lock held by another process.
	// Zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// FileMode is used when the file is created. Zero means 0o600.
	FileMode os.FileMode
	// ReadOnly opens the file shared and read-only (CheckFile, tools reading a stopped
	// daemon's file): nothing is created, migrated or written, Apply and Compact fail,
	// and a file held by a running daemon fails after LockTimeout.
	ReadOnly bool
	// Faults, if set, is called before each write of the file with the site's name
	// ("commit": an Apply's commit, "ack": an Ack, "compact": a Compact); an error it
	// returns fails that write as the file system would (the transaction rolls back, the
	// compaction leaves the old file). For fault-injection tests of the callers.
	Faults func(site string) error
	// Now is the clock of Tx.Time, which outbox entries record. Nil means time.Now;
	// tests that need reproducible files set a fixed one.
	Now func() time.Time
	// Check runs Store.Check once the file is open and refuses a file with problems
	// (an error matching ErrDamaged naming the first ones). It reads the whole file.
	Check bool
}

// now is the time a transaction begins, in UTC (Options.Now).
func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now().UTC()
	}
	return time.Now().UTC()
}

func (o Options) withDefaults() Options {
	if o.InitialMmapSize == 0 {
		o.InitialMmapSize = DefaultInitialMmapSize
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	return o
}

func (o Options) bolt() *bolt.Options {
	return &bolt.Options{
		Timeout:         o.LockTimeout,
		NoSync:          o.NoSync,
		InitialMmapSize: o.InitialMmapSize,
		FreelistType:    bolt.FreelistMapType,
		ReadOnly:        o.ReadOnly,
	}
}

// Store is one open cairn state file. It is safe for concurrent use: Apply
// calls are serialized (one writer), View calls run concurrently with each other
// and with Apply, and Compact excludes both.
type Store struct {
	path  string
	slots string // slotsDir(path)
	opts  Options
	wmu   sync.Mutex // serializes Apply (see there)
	// slotMu keeps a dropped slot until the read transactions that may still see the
	// point referencing it have ended: View holds it shared, erasure exclusively.
	slotMu sync.RWMutex

	// mu guards db and closed. Apply, View, Pending and Ack hold it shared;
	// Compact and Close hold it exclusively because they replace or drop db.
	mu     sync.RWMutex
	db     *bolt.DB
	closed bool

	ready chan struct{} // OutboxReady; buffered 1, never closed

	// scrub runs the zero-overwrite of the inode the last Compact replaced, in the
	// background (the file at path no longer holds the bytes by then); the next Compact
	// and Close wait for it and report its error, kept in scrubErr (written by the
	// goroutine before it is done, read only after Wait).
	scrub    sync.WaitGroup
	scrubErr error
}

// Open opens or creates the store at path. A new file is initialized with
// FormatVersion. An existing file of an older version this package can migrate
// (versions 1 and 2) is upgraded to FormatVersion in one transaction, so after a crash
// the file is either entirely the old version or entirely the new one; any
// other version, or a file lacking a bucket of its version, fails with an error
// matching ErrUnknownFormat and is left unchanged. A compaction temp file left
// by a crash is removed (it is never the source of truth).
//
// A damaged file gives an error matching ErrDamaged, never a crash: a file shorter
// than its meta page says is refused before it is mapped, and a page bbolt cannot read,
// at open or by any later call, fails that call (damage.go). With opts.Check the whole
// file is checked (Store.Check) before anything is written to it (a migration
// included), and a file with problems is refused and left as it was.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.Remove(compactTempPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("storage: removing stale compaction file: %w", err)
	}
	db, migrated, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, slots: slotsDir(path), opts: opts, db: db, ready: make(chan struct{}, 1)}
	s.ready <- struct{}{} // entries may be pending from before the restart
	if !opts.ReadOnly {
		if _, err := s.scrubSlots(); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	if migrated {
		// The inputs left the values (migrate3to4); erase their old bytes from the file.
		if err := s.Compact(); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// scrubSlots finishes what a crash interrupted: it erases the slots of a transaction
// that did not commit (ids above slot_last) and those a committed transaction dropped
// but did not erase (slots_dropped), then releases the outbox hold. It reads two meta
// values and lists the slot directory; it never guesses from the points.
func (s *Store) scrubSlots() (pending bool, err error) {
	ids, _, err := slotFiles(s.slots)
	if err != nil {
		return false, fmt.Errorf("storage: list slots: %w", err)
	}
	var (
		last    uint64
		dropped []slotHole
		held    bool
	)
	err = s.View(func(tx *ReadTx) error {
		var err error
		if last, err = tx.metaU64(metaSlotLast); err != nil {
			return err
		}
		if hold, err := tx.metaU64(metaScrubHold); err != nil {
			return err
		} else {
			held = hold != 0
		}
		if v := tx.tx.Bucket(bucketMeta).Get(metaSlotDropped); v != nil {
			var why string
			if dropped, why = decodeHoles(metaSlotDropped, v); why != "" {
				return corrupt(bucketMeta, metaSlotDropped, why)
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if id > last { // the segment of a transaction that did not commit
			dropped = append(dropped, slotHole{seg: id})
		}
	}
	s.slotMu.Lock()
	err = eraseSlots(s.slots, dropped)
	s.slotMu.Unlock()
	if err != nil {
		return false, err
	}
	if held || len(dropped) > 0 {
		return true, s.releaseHold()
	}
	return false, nil
}

// fault is Options.Faults at site, or nil.
func (s *Store) fault(site string) error {
	if s.opts.Faults == nil {
		return nil
	}
	if err := s.opts.Faults(site); err != nil {
		return fmt.Errorf("storage: %s %s: %w", site, s.path, err)
	}
	return nil
}

// refuseDamaged is Options.Check, before anything is written to the file.
func refuseDamaged(db *bolt.DB, path string) error {
	rep, err := checkDB(db, path)
	if err != nil {
		return err
	}
	if rep.OK {
		return nil
	}
	first := rep.Problems[:min(3, len(rep.Problems))]
	return &DamageError{Path: path, Reason: fmt.Sprintf("the check at open found %d problems (`cairnctl check` lists them): %s",
		rep.ProblemCount, strings.Join(first, "; "))}
}

// openDB opens the bbolt file and checks or initializes its format; on failure
// the file is closed again.
func openDB(path string, opts Options) (_ *bolt.DB, migrated bool, err error) {
	if err := checkSize(path); err != nil {
		return nil, false, err
	}
	db, err := boltOpen(path, opts)
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) {
		// Not a bbolt file, or one of another bbolt page version.
		return nil, false, &FormatError{Path: path, Want: FormatVersion, Reason: "not a bbolt file of a supported version: " + err.Error()}
	}
	if errors.Is(err, berrors.ErrChecksum) {
		return nil, false, &DamageError{Path: path, Reason: "both meta pages fail their checksum"}
	}
	if errors.Is(err, ErrDamaged) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("storage: open %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, db.Close())
		}
	}()
	if opts.Check {
		if err := refuseDamaged(db, path); err != nil {
			return nil, false, err
		}
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(slotsDir(path), 0o700); err != nil {
			return nil, false, fmt.Errorf("storage: slot directory: %w", err)
		}
	}
	if opts.ReadOnly {
		err = db.View(func(tx *bolt.Tx) (err error) {
			defer recoverDamage(path, &err)
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			return checkFormat(path, tx)
		})
	} else {
		err = db.Update(func(tx *bolt.Tx) (err error) {
			defer recoverDamage(path, &err)
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			from, err := initFormat(path, tx)
			migrated = from > 0 && from < 4
			return err
		})
	}
	if err != nil {
		return nil, false, err
	}
	return db, migrated, nil
}

// boltOpen is bolt.Open with a panic on a damaged file turned into a *DamageError.
func boltOpen(path string, opts Options) (db *bolt.DB, err error) {
	defer recoverDamage(path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return bolt.Open(path, opts.FileMode, opts.bolt())
}

// initFormat creates the buckets of an empty file, or checks the version of an
// existing one and migrates it to FormatVersion. It runs in the transaction of
// openDB, so a failed check or migration leaves the file as it was.
func initFormat(path string, tx *bolt.Tx) (migratedFrom uint64, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return 0, &FormatError{Path: path, Want: FormatVersion, Reason: "no meta bucket in a non-empty file"}
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return 0, fmt.Errorf("storage: create bucket %q: %w", name, err)
			}
		}
		return 0, tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, FormatVersion))
	}
	v := meta.Get(metaFormat)
	if v == nil {
		return 0, &FormatError{Path: path, Want: FormatVersion, Reason: "meta bucket has no format_version"}
	}
	got, why := decodeMetaU64(metaFormat, v)
	if why != "" {
		return 0, &FormatError{Path: path, Want: FormatVersion, Reason: "format_version: " + why}
	}
	if got == 0 || got > FormatVersion || (got < FormatVersion && migrations[got] == nil) {
		return 0, &FormatError{Path: path, Got: uint32(min(got, 1<<32-1)), Want: FormatVersion}
	}
	if got < FormatVersion {
		return got, migrateFormat(path, tx, got)
	}
	return 0, requireBuckets(path, tx, FormatVersion, allBuckets)
}

// checkFormat is initFormat for a read-only open: the file must already be of
// FormatVersion, since a migration writes.
func checkFormat(path string, tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return &FormatError{Path: path, Want: FormatVersion, Reason: "no meta bucket (an empty or foreign file)"}
	}
	got, why := decodeMetaU64(metaFormat, meta.Get(metaFormat))
	switch {
	case meta.Get(metaFormat) == nil:
		return &FormatError{Path: path, Want: FormatVersion, Reason: "meta bucket has no format_version"}
	case why != "":
		return &FormatError{Path: path, Want: FormatVersion, Reason: "format_version: " + why}
	case got < FormatVersion && got > 0 && migrations[got] != nil:
		return &FormatError{Path: path, Got: uint32(got), Want: FormatVersion,
			Reason: fmt.Sprintf("format version %d is migrated by a read-write open (cairnd's start); a read-only open does not write", got)}
	case got != FormatVersion:
		return &FormatError{Path: path, Got: uint32(min(got, 1<<32-1)), Want: FormatVersion}
	}
	return requireBuckets(path, tx, FormatVersion, allBuckets)
}

// requireBuckets fails with *FormatError unless every bucket in names exists.
func requireBuckets(path string, tx *bolt.Tx, version uint64, names [][]byte) error {
	for _, name := range names {
		if tx.Bucket(name) == nil {
			return &FormatError{Path: path, Got: uint32(version), Want: FormatVersion, Reason: fmt.Sprintf("version %d file is missing bucket %q", version, name)}
		}
	}
	return nil
}

// migrateFormat upgrades a file of version from (0 < from < FormatVersion, with
// a migration) step by step to FormatVersion and records the new version.
func migrateFormat(path string, tx *bolt.Tx, from uint64) error {
	if err := requireBuckets(path, tx, from, formatBuckets[from]); err != nil {
		return err
	}
	for v := from; v < FormatVersion; v++ {
		if migrations[v] == nil {
			return &FormatError{Path: path, Got: uint32(from), Want: FormatVersion, Reason: fmt.Sprintf("no migration from version %d", v)}
		}
		if err := migrations[v](path, tx); err != nil {
			return err
		}
	}
	if err := requireBuckets(path, tx, FormatVersion, allBuckets); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMeta).Put(metaFormat, encodeMetaU64(metaFormat, FormatVersion)); err != nil {
		return fmt.Errorf("storage: migrate %s: set format_version %d: %w", path, FormatVersion, err)
	}
	return nil
}

// Path returns the file path given to Open.
func (s *Store) Path() string { return s.path }

// Close closes the file. It is idempotent; the second and later calls return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	scrubErr := s.waitScrub()
	var err error
	if s.db != nil {
		err = s.db.Close()
		s.db = nil
	}
	if err != nil {
		err = fmt.Errorf("storage: close %s: %w", s.path, err)
	}
	return errors.Join(scrubErr, err)
}

// waitScrub waits for the background overwrite of the last compaction's old inode and
// returns (once) its error.
func (s *Store) waitScrub() error {
	s.scrub.Wait()
	err := s.scrubErr
	s.scrubErr = nil
	if err != nil {
		return fmt.Errorf("storage: compact %s: %w", s.path, err)
	}
	return nil
}

// Apply runs fn in one read-write transaction and commits it if fn returns nil.
// If fn returns an error (or panics), nothing fn wrote is kept: no state, no
// offset, no outbox entry, no audit record. With NoSync false, the changes are
// on disk when Apply returns nil. tx must not be used after fn returns.
//
// If fn deleted a point (Tx.DeletePoint returned true), every outbox entry
// enqueued by this transaction or later is held back from Pending until Compact
// has erased the deleted bytes from the file: the audit of a deletion cannot be
// published before the erasure it attests.
func (s *Store) Apply(fn func(tx *Tx) error) (err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("%w: %s is open read-only", ErrInvalid, s.path)
	}
	defer recoverDamage(s.path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	// Writers are serialized (bbolt allows one anyway) so that a transaction's slot
	// erasure and the release of its outbox hold come before the next one commits.
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var t *Tx
	committed := false
	defer func() { // also when fn panics: its slots are referenced by nothing
		if !committed && t != nil && len(t.created) > 0 {
			holes := make([]slotHole, len(t.created))
			for i, seg := range t.created {
				holes[i] = slotHole{seg: seg}
			}
			if cerr := errors.Join(t.seg.close(), eraseSlots(s.slots, holes)); cerr != nil && err != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	err = s.db.Update(func(btx *bolt.Tx) error {
		t = &Tx{ReadTx: ReadTx{tx: btx, slots: s.slots}, now: s.now()}
		defer func() { t.done = true }()
		if err := fn(t); err != nil {
			return err
		}
		if err := t.finish(); err != nil {
			return err
		}
		return s.fault("commit")
	})
	if err != nil {
		return err
	}
	committed = true
	if err := s.erase(t); err != nil {
		return err
	}
	if t.outboxLoaded && t.outboxSeq != t.outboxStart {
		s.notify()
	}
	return nil
}

// erase erases the slots t dropped, now that it committed, and releases the outbox
// hold t set. On failure the hold stays; the next Open erases the slots (nothing
// references them) and releases it.
func (s *Store) erase(t *Tx) error {
	if len(t.dropped) == 0 {
		return nil
	}
	if err := s.fault("erase"); err != nil {
		return err
	}
	s.slotMu.Lock()
	err := eraseSlots(s.slots, t.dropped)
	s.slotMu.Unlock()
	if err != nil {
		return err
	}
	return s.releaseHold()
}

// releaseHold forgets the dropped slots (erased by now) and lets Pending return the
// outbox entries held since their deletion.
func (s *Store) releaseHold() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(metaSlotDropped); err != nil {
			return err
		}
		return meta.Put(metaScrubHold, encodeMetaU64(metaScrubHold, 0))
	})
}

// View runs fn in a read-only transaction. Everything a ReadTx returns is a
// copy owned by the caller and stays valid after fn returns; tx does not.
func (s *Store) View(fn func(tx *ReadTx) error) (err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	defer recoverDamage(s.path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	s.slotMu.RLock()
	defer s.slotMu.RUnlock()
	return s.db.View(func(btx *bolt.Tx) error {
		t := &ReadTx{tx: btx, slots: s.slots}
		defer func() { t.done = true }()
		return fn(t)
	})
}

// Offsets returns every stored consumed offset, ordered by topic then partition.
func (s *Store) Offsets() (out []Offset, err error) {
	err = s.View(func(tx *ReadTx) error {
		out, err = tx.Offsets()
		return err
	})
	return out, err
}

// OutboxReady returns a channel that receives a value after an Apply that
// enqueued entries, after a Compact that released held entries, and once after
// Open. A publisher waits on it between Pending calls; the channel is never
// closed, so the publisher also selects on its own context.
func (s *Store) OutboxReady() <-chan struct{} { return s.ready }

func (s *Store) notify() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Pending returns up to limit outbox entries in seq order (all when limit <= 0),
// excluding entries held until the next Compact (see Apply). The entries stay in
// the outbox until Ack; calling Pending again returns them again. It reads the
// outbox only; pending deletion audits (not yet turned into outbox entries) are
// read with ReadTx.Pending and ReadTx.ForEachPending.
func (s *Store) Pending(limit int) (out []OutboxEntry, err error) {
	err = s.View(func(tx *ReadTx) error {
		if err := tx.check(); err != nil {
			return err
		}
		hold, err := tx.metaU64(metaScrubHold)
		if err != nil {
			return err
		}
		c := tx.tx.Bucket(bucketOutbox).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			e, why := decodeOutbox(k, v)
			if why != "" {
				return &CorruptError{Bucket: string(bucketOutbox), Key: bytes.Clone(k), Reason: why}
			}
			if hold != 0 && e.Seq >= hold {
				break
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// OutboxSpan is the number of outbox entries from the oldest unacknowledged to the
// newest: the outbox's length when entries are acknowledged oldest first, as the
// publisher does (an upper bound otherwise). It reads one key and one meta value, so
// it is cheap enough to call per batch, for back-pressure.
func (s *Store) OutboxSpan() (n int, err error) {
	err = s.View(func(tx *ReadTx) error {
		k, _ := tx.tx.Bucket(bucketOutbox).Cursor().First()
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return corrupt(bucketOutbox, k, "key is not an 8-byte sequence number")
		}
		last, err := tx.metaU64(metaOutboxSeq)
		if err != nil {
			return err
		}
		if first := binary.BigEndian.Uint64(k); last >= first {
			n = int(min(last-first+1, 1<<31))
		}
		return nil
	})
	return n, err
}

// Ack deletes sent outbox entries. Seqs that are not in the outbox (already
// acknowledged) are ignored, so a publisher may re-ack after a retry.
func (s *Store) Ack(seqs ...uint64) (err error) {
	if len(seqs) == 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	defer recoverDamage(s.path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := s.fault("ack"); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		for _, seq := range seqs {
			if err := b.Delete(u64Key(seq)); err != nil {
				return fmt.Errorf("storage: ack seq %d: %w", seq, err)
			}
		}
		return nil
	})
}

// ScrubPending finishes the erasure of committed deletions whose slots were not
// erased (Apply returned the erasure's error, or the process stopped in between): it
// erases them and releases the outbox entries held since. It reports whether there was
// such a deletion. Open runs it; an owner that saw Apply fail after its commit runs it
// before going on.
func (s *Store) ScrubPending() (pending bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false, ErrClosed
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.scrubSlots()
}

// VerifyAudit walks the audit chain from seq 1 and returns nil if every record
// verifies: seqs are 1, 2, 3… without gaps, each PrevHash equals the previous
// Hash (32 zero bytes for seq 1), and each Hash equals SHA-256(PrevHash || Body).
// Otherwise it returns an *AuditBreakError (or *CorruptError for a value whose
// checksum fails) naming the first bad seq.
func (s *Store) VerifyAudit() error {
	return s.View(func(tx *ReadTx) error { return verifyAudit(tx.tx) })
}

// verifyAudit is VerifyAudit in tx.
func verifyAudit(tx *bolt.Tx) error {
	var prev [32]byte
	want := uint64(1)
	b := tx.Bucket(bucketAudit)
	if b == nil {
		return nil // a new file (Check reports a missing bucket otherwise)
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		a, why := decodeAudit(k, v)
		if why != "" {
			seq := want
			if len(k) == 8 {
				seq = binary.BigEndian.Uint64(k)
			}
			return &AuditBreakError{Seq: seq, Reason: (&CorruptError{Bucket: string(bucketAudit), Key: bytes.Clone(k), Reason: why}).Error()}
		}
		if a.Seq != want {
			return &AuditBreakError{Seq: want, Reason: fmt.Sprintf("record missing (next stored seq is %d)", a.Seq)}
		}
		if a.PrevHash != prev {
			return &AuditBreakError{Seq: a.Seq, Reason: fmt.Sprintf("prev_hash %x does not match hash of seq %d %x", a.PrevHash, a.Seq-1, prev)}
		}
		if h := chainHash(&prev, a.Body); h != a.Hash {
			return &AuditBreakError{Seq: a.Seq, Reason: fmt.Sprintf("stored hash %x, recomputed %x", a.Hash, h)}
		}
		prev = a.Hash
		want++
	}
	return nil
}

// chainHash is SHA-256(prev || body).
func chainHash(prev *[32]byte, body []byte) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func compactTempPath(path string) string { return path + ".compact.tmp" }

// Compact rewrites the file so that it holds only live data, which erases every
// byte of deleted or overwritten values, including those bbolt left on freed
// pages (bbolt is copy-on-write and never zeroes a freed page). Steps: copy all
// buckets into path+".compact.tmp" with bbolt.Compact (the outbox hold and the
// dropped slots are copied as they are: only their erasure releases the hold), fsync
// it, rename it over path, fsync the directory, overwrite the old
// file's blocks with zeros through a descriptor kept open across the rename,
// and reopen. A crash at any point leaves either the old or the new file at
// path, both complete; the temp file is removed by the next Open. The overwrite
// of the old inode (no longer reachable at path) runs on a goroutine the Store
// owns after Compact returns; the next Compact and Close wait for it and return
// its error.
//
// Cost: it reads and writes the whole live data once (plus, in the background, one
// write of the old file size for the overwrite) and excludes Apply and View while it runs,
// so the daemon calls it once per batch of deletions, after the batch is
// committed and before its audits are published (Pending holds them until
// then). Overwriting the old inode is defence in depth: on copy-on-write or
// log-structured file systems and on SSDs the old blocks may survive
// physically; the guarantee given is about the bytes readable in the file.
//
// If reopening fails the Store is closed and the error says so.
func (s *Store) Compact() (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("%w: %s is open read-only", ErrInvalid, s.path)
	}
	if err := s.waitScrub(); err != nil {
		return err
	}
	if err := s.fault("compact"); err != nil {
		return fmt.Errorf("storage: compact %s: %w", s.path, err)
	}
	tmp := compactTempPath(s.path)
	if err := s.writeCompactCopy(tmp); err != nil {
		return errors.Join(err, removeIfExists(tmp))
	}
	old, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return errors.Join(fmt.Errorf("storage: compact: open old file for overwrite: %w", err), removeIfExists(tmp))
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return errors.Join(fmt.Errorf("storage: compact: rename: %w", err), removeIfExists(tmp), old.Close())
	}
	// From here the new file is the store; failures below lose nothing but must
	// still be reported.
	errs := []error{syncDir(filepath.Dir(s.path))}
	errs = append(errs, s.db.Close())
	s.db = nil
	s.scrub.Go(func() {
		s.scrubErr = errors.Join(zeroFile(old), old.Close())
	})
	db, _, oerr := openDB(s.path, s.opts)
	if oerr != nil {
		s.closed = true
		errs = append(errs, fmt.Errorf("storage: compact: reopen failed, store closed: %w", oerr), s.waitScrub())
	} else {
		s.db = db
		s.notify()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: compact %s: %w", s.path, err)
	}
	return nil
}

// writeCompactCopy writes the compacted, fsynced copy of s.db to tmp.
func (s *Store) writeCompactCopy(tmp string) (err error) {
	if err := removeIfExists(tmp); err != nil {
		return err
	}
	o := s.opts.bolt()
	o.NoSync = true // one fsync at the end instead of one per copy transaction
	dst, err := bolt.Open(tmp, s.opts.FileMode, o)
	if err != nil {
		return fmt.Errorf("storage: compact: create %s: %w", tmp, err)
	}
	defer func() { err = errors.Join(err, dst.Close()) }()
	defer recoverDamage(s.path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := bolt.Compact(dst, s.db, compactTxMaxSize); err != nil {
		return fmt.Errorf("storage: compact: copy: %w", err)
	}
	if err := dst.Sync(); err != nil {
		return fmt.Errorf("storage: compact: fsync %s: %w", tmp, err)
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// zeroFile overwrites f (already unlinked by the rename) with zeros and fsyncs.
func zeroFile(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < st.Size(); off += int64(len(zeros)) {
		n := min(int64(len(zeros)), st.Size()-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("overwrite old file: %w", err)
		}
	}
	return f.Sync()
}

var _ io.Closer = (*Store)(nil)
