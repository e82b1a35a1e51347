package storage

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// SubjectHash names a data subject (the person a record is about) by a keyed hash of
// the subject's id, HMAC-SHA256 under the deployment's subject key: the file never holds
// a subject id in plain text (FORMAT.md, "Subjects").
type SubjectHash [32]byte

// MaxBlockRecord bounds the record kept with a blocked subject (Block).
const MaxBlockRecord = 4096

// The subject buckets, since format version 6.
var (
	bucketSubjects  = []byte("subjects")  // subject hash ‖ point id → 0x01
	bucketPointSubj = []byte("pointsubj") // point id → subject hash
	bucketBlocked   = []byte("blocked")   // subject hash → JSON record
)

// migrate5to6 adds the subject buckets, empty (FORMAT.md, "Migrations"): no stored
// point has a subject yet.
func migrate5to6(path string, tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketSubjects, bucketPointSubj, bucketBlocked} {
		if tx.Bucket(b) != nil {
			return &FormatError{Path: path, Got: 5, Want: FormatVersion, Reason: fmt.Sprintf("version 5 file already has bucket %q", b)}
		}
		if _, err := tx.CreateBucket(b); err != nil {
			return fmt.Errorf("storage: migrate %s to format 6: create bucket %q: %w", path, b, err)
		}
	}
	return nil
}

// SetSubject records that point id is about subject s (nil: about no subject), replacing
// what an earlier upsert of id said. The point must be stored. DeletePoint clears it.
func (t *Tx) SetSubject(id string, s *SubjectHash) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := validID("point id", id); err != nil {
		return err
	}
	k := []byte(id)
	if s != nil && t.tx.Bucket(bucketPoints).Get(k) == nil {
		return invalidf("subject of point %q: the point is not stored", id)
	}
	if err := t.clearSubject(k); err != nil {
		return err
	}
	if s == nil {
		return nil
	}
	if err := t.tx.Bucket(bucketPointSubj).Put(k, bytes.Clone(s[:])); err != nil {
		return fmt.Errorf("storage: set subject of %q: %w", id, err)
	}
	if err := t.tx.Bucket(bucketSubjects).Put(subjectKey(*s, id), []byte{1}); err != nil {
		return fmt.Errorf("storage: set subject of %q: %w", id, err)
	}
	return nil
}

// clearSubject removes point key k from the subject index.
func (t *Tx) clearSubject(k []byte) error {
	ps := t.tx.Bucket(bucketPointSubj)
	old := ps.Get(k)
	if old == nil {
		return nil
	}
	if len(old) != len(SubjectHash{}) {
		return corrupt(bucketPointSubj, k, fmt.Sprintf("subject hash of %d bytes", len(old)))
	}
	if err := t.tx.Bucket(bucketSubjects).Delete(subjectKey(SubjectHash(old), string(k))); err != nil {
		return fmt.Errorf("storage: clear subject of %q: %w", k, err)
	}
	if err := ps.Delete(k); err != nil {
		return fmt.Errorf("storage: clear subject of %q: %w", k, err)
	}
	return nil
}

// Subject returns the subject point id is about (ok false: none recorded).
func (r *ReadTx) Subject(id string) (s SubjectHash, ok bool, err error) {
	if err := r.check(); err != nil {
		return s, false, err
	}
	v := r.tx.Bucket(bucketPointSubj).Get([]byte(id))
	if v == nil {
		return s, false, nil
	}
	if len(v) != len(s) {
		return s, false, corrupt(bucketPointSubj, []byte(id), fmt.Sprintf("subject hash of %d bytes", len(v)))
	}
	return SubjectHash(v), true, nil
}

// SubjectPoints returns the ids of the stored points about subject s, in key order.
func (r *ReadTx) SubjectPoints(s SubjectHash) ([]string, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	var ids []string
	c := r.tx.Bucket(bucketSubjects).Cursor()
	for k, _ := c.Seek(s[:]); k != nil && bytes.HasPrefix(k, s[:]); k, _ = c.Next() {
		ids = append(ids, string(k[len(s):]))
	}
	return ids, nil
}

// Block records that subject s is blocked (erased: a later upsert naming it is refused),
// with record, a JSON object of at most MaxBlockRecord bytes saying by which request
// and when; a later Block replaces it.
func (t *Tx) Block(s SubjectHash, record []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if why := checkBlockRecord(record); why != "" {
		return invalidf("block record: %s", why)
	}
	if err := t.tx.Bucket(bucketBlocked).Put(bytes.Clone(s[:]), bytes.Clone(record)); err != nil {
		return fmt.Errorf("storage: block subject: %w", err)
	}
	return nil
}

// Unblock lifts the block of subject s and reports whether there was one.
func (t *Tx) Unblock(s SubjectHash) (existed bool, err error) {
	if err := t.check(); err != nil {
		return false, err
	}
	b := t.tx.Bucket(bucketBlocked)
	if b.Get(s[:]) == nil {
		return false, nil
	}
	if err := b.Delete(s[:]); err != nil {
		return false, fmt.Errorf("storage: unblock subject: %w", err)
	}
	return true, nil
}

// Blocked returns the record of subject s's block (ok false: not blocked).
func (r *ReadTx) Blocked(s SubjectHash) (record []byte, ok bool, err error) {
	if err := r.check(); err != nil {
		return nil, false, err
	}
	v := r.tx.Bucket(bucketBlocked).Get(s[:])
	if v == nil {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

// subjectKey is the subjects bucket's key of point id about s.
func subjectKey(s SubjectHash, id string) []byte {
	return append(bytes.Clone(s[:]), id...)
}

// checkBlockRecord says why record cannot be a block record ("" if it can).
func checkBlockRecord(record []byte) string {
	switch {
	case len(record) > MaxBlockRecord:
		return fmt.Sprintf("%d bytes, more than %d", len(record), MaxBlockRecord)
	case !json.Valid(record) || len(bytes.TrimSpace(record)) == 0 || bytes.TrimSpace(record)[0] != '{':
		return "not a JSON object"
	}
	return ""
}

// decodeSubjectRecord, decodePointSubject and decodeBlocked check a record of the
// subject buckets (Check): "" when it is well formed.
func decodeSubjectRecord(k, v []byte) string {
	if len(k) <= len(SubjectHash{}) || !bytes.Equal(v, []byte{1}) {
		return "not a subject hash, a point id and the value 0x01"
	}
	return ""
}

func decodePointSubject(k, v []byte) string {
	if len(k) == 0 || len(v) != len(SubjectHash{}) {
		return fmt.Sprintf("subject hash of %d bytes", len(v))
	}
	return ""
}

func decodeBlocked(k, v []byte) string {
	if len(k) != len(SubjectHash{}) {
		return fmt.Sprintf("key of %d bytes, want a subject hash", len(k))
	}
	return checkBlockRecord(v)
}
