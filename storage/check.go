package storage

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// maxProblems bounds the problems a check lists; Problems counts them all.
const maxProblems = 100

// CheckReport is what Check found. A file is OK when bbolt's consistency check and
// every record check pass.
type CheckReport struct {
	Path string `json:"path"`
	OK   bool   `json:"ok"`
	// Format is the file's format version; Pages and PageSize its bbolt geometry.
	Format   uint64 `json:"format_version"`
	Pages    int64  `json:"pages"`
	PageSize int    `json:"page_size"`
	// Keys counts the records of each bucket.
	Keys map[string]int `json:"keys"`
	// Problems are the first maxProblems problems found, each naming its page or
	// bucket and key; ProblemCount counts all of them.
	Problems     []string `json:"problems"`
	ProblemCount int      `json:"problem_count"`
}

func (r *CheckReport) add(format string, args ...any) {
	r.ProblemCount++
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// CheckFile opens the file at path read-only (shared: a file a running daemon holds
// fails after opts.LockTimeout) and checks it (Store.Check). A file too damaged to
// open gives no report but an error matching ErrDamaged or ErrUnknownFormat.
func CheckFile(path string, opts Options) (*CheckReport, error) {
	opts.ReadOnly = true
	s, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	rep, err := s.Check()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return rep, err
}

// Check reads the whole file: bbolt's consistency check of its pages (every page
// reachable once, freed pages unreachable, keys in order, page types as expected),
// then every record of every bucket through the decoder that reads it (checksums,
// lengths, keys), the audit hash chain (VerifyAudit), the stored point count, and that
// every per-point pool record names a stored point. It returns an error only when the
// check could not run; what it finds is in the report. It holds one read transaction
// for its whole run, O(file size) time.
func (s *Store) Check() (*CheckReport, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return checkDB(s.db, s.path)
}

// checkDB is Check of db, the file at path, whatever its format version: buckets of
// later versions are not required of an older file.
func checkDB(db *bolt.DB, path string) (rep *CheckReport, err error) {
	defer recoverDamage(path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	rep = &CheckReport{Path: path, Keys: map[string]int{}}
	err = db.View(func(tx *bolt.Tx) error {
		rep.PageSize = db.Info().PageSize
		rep.Pages = tx.Size() / int64(rep.PageSize)
		for err := range tx.Check() {
			rep.add("pages: %v", err)
		}
		checkRecords(tx, rep)
		if err := verifyAudit(tx); err != nil {
			rep.add("%v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.OK = rep.ProblemCount == 0
	return rep, nil
}

// recordChecks decode every value of a bucket; each returns why a record is bad, or "".
var recordChecks = map[string]func(k, v []byte) string{
	string(bucketPoints): func(k, v []byte) string { _, _, why := decodePoint(k, v); return why },
	string(bucketPool): func(k, v []byte) string {
		if !bytes.Equal(k, poolStateKey) {
			return "unknown key"
		}
		_, why := decodePoolState(k, v)
		return why
	},
	string(bucketPoolPts):   func(k, v []byte) string { _, why := decodePoolPoint(k, v); return why },
	string(bucketModels):    func(k, v []byte) string { _, why := decodeModel(k, v); return why },
	string(bucketFitStats):  func(k, v []byte) string { _, why := decodeFitStats(k, v); return why },
	string(bucketOffsets):   func(k, v []byte) string { _, why := decodeOffset(k, v); return why },
	string(bucketOutbox):    func(k, v []byte) string { _, why := decodeOutbox(k, v); return why },
	string(bucketAudit):     func(k, v []byte) string { _, why := decodeAudit(k, v); return why },
	string(bucketPending):   func(k, v []byte) string { _, _, why := decodePending(k, v); return why },
	string(bucketDeleted):   func(k, v []byte) string { _, why := decodeDeleted(k, v); return why },
	string(bucketSubjects):  decodeSubjectRecord,
	string(bucketPointSubj): decodePointSubject,
	string(bucketBlocked):   decodeBlocked,
	string(bucketMeta): func(k, v []byte) string {
		if bytes.Equal(k, metaSlotDropped) {
			_, why := decodeHoles(k, v)
			return why
		}
		_, why := decodeMetaU64(k, v)
		return why
	},
}

// checkRecords decodes every record of tx into rep. A page too damaged to read stops
// the bucket it is in, as a problem.
func checkRecords(tx *bolt.Tx, rep *CheckReport) {
	var names []string
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		names = append(names, string(name))
		return nil
	})
	sort.Strings(names)
	if meta := tx.Bucket(bucketMeta); meta != nil {
		rep.Format, _ = decodeMetaU64(metaFormat, meta.Get(metaFormat))
	}
	required := allBuckets
	if len(names) == 0 {
		return // a new file: Open creates the buckets
	}
	if rep.Format > 0 && rep.Format < FormatVersion {
		required = formatBuckets[rep.Format]
	}
	for _, want := range required {
		if tx.Bucket(want) == nil {
			rep.add("bucket %q is missing", want)
		}
	}
	for _, name := range names {
		chk, ok := recordChecks[name]
		if !ok {
			rep.add("bucket %q is not a bucket of format %d", name, FormatVersion)
			continue
		}
		if err := checkBucket(tx, name, chk, rep); err != nil {
			rep.add("bucket %q: %v", name, err)
		}
	}
	checkSlots(tx, rep)
	if meta := tx.Bucket(bucketMeta); meta == nil {
		return
	} else if v := meta.Get(metaPointCount); v != nil {
		if n, why := decodeMetaU64(metaPointCount, v); why == "" && n != uint64(rep.Keys[string(bucketPoints)]) {
			rep.add("meta point_count is %d, the points bucket holds %d", n, rep.Keys[string(bucketPoints)])
		}
	}
}

// checkBucket runs chk over every record of bucket name, and checks that a per-point
// pool record names a stored point.
func checkBucket(tx *bolt.Tx, name string, chk func(k, v []byte) string, rep *CheckReport) (err error) {
	defer recoverDamage(tx.DB().Path(), &err)
	b, points := tx.Bucket([]byte(name)), tx.Bucket(bucketPoints)
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rep.Keys[name]++
		if v == nil {
			rep.add("bucket %q key %x: a nested bucket", name, k)
			continue
		}
		if why := chk(k, v); why != "" {
			rep.add("bucket %q key %x: %s", name, k, why)
		}
		if (name == string(bucketPoolPts) || name == string(bucketPointSubj)) && points != nil && points.Get(k) == nil {
			rep.add("bucket %q key %x: a record of a point that is not stored", name, k)
		}
	}
	return nil
}

// checkSlots reads every point's slot (slots.go) and checks its length and CRC, and
// reports slot files no point references (left by a crash between a commit and its
// erasure; the next read-write Open erases them).
func checkSlots(tx *bolt.Tx, rep *CheckReport) {
	if err := checkPointSlots(tx, rep); err != nil {
		rep.add("slots: %v", err)
	}
}

func checkPointSlots(tx *bolt.Tx, rep *CheckReport) (err error) {
	defer recoverDamage(tx.DB().Path(), &err)
	points, meta := tx.Bucket(bucketPoints), tx.Bucket(bucketMeta)
	if points == nil || meta == nil {
		return nil
	}
	dir := slotsDir(tx.DB().Path())
	used := map[uint64]bool{}
	_ = points.ForEach(func(k, v []byte) error {
		_, ref, why := decodePoint(k, v)
		if why != "" || ref == nil {
			return nil // reported by the record check (or a format 3 file, before migration)
		}
		used[ref.seg] = true
		if _, why := readSlot(dir, *ref); why != "" {
			rep.add("bucket \"points\" key %x: %s", k, why)
		}
		return nil
	})
	// Slots awaiting their erasure (dropped by a committed transaction, or written by
	// one that did not commit: ids above slot_last) are expected after a crash; the
	// next read-write Open erases them. Any other unreferenced slot is a problem.
	last, _ := decodeMetaU64(metaSlotLast, meta.Get(metaSlotLast))
	if v := meta.Get(metaSlotDropped); v != nil {
		dropped, _ := decodeHoles(metaSlotDropped, v)
		for _, h := range dropped {
			used[h.seg] = true
		}
	}
	ids, strays, err := slotFiles(dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !used[id] && id <= last {
			rep.add("slot segment %s: referenced by no point", slotName(id))
		}
	}
	for _, n := range strays {
		rep.add("slots: %q is not a slot file", n)
	}
	return nil
}
