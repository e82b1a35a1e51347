package storage

import (
	"errors"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestSubjects: the subject index follows the points: SetSubject files a point under its
// subject (and moves it on a re-upsert naming another), DeletePoint takes it out, and
// SubjectPoints lists exactly the stored points of a subject; blocks keep their record
// until Unblock; bad records and unknown points are refused; Check reads every subject
// record and flags one of a point that is not stored.
func TestSubjects(t *testing.T) {
	s, path := openTemp(t)
	alice, bob := SubjectHash{1, 2, 3}, SubjectHash{9}
	err := s.Apply(func(tx *Tx) error {
		for _, id := range []string{"a1", "a2", "a3", "b1"} {
			if err := tx.PutPoint(samplePoint(id, 3)); err != nil {
				return err
			}
		}
		for _, id := range []string{"a1", "a2", "a3"} {
			if err := tx.SetSubject(id, &alice); err != nil {
				return err
			}
		}
		if err := tx.SetSubject("b1", &bob); err != nil {
			return err
		}
		if err := tx.SetSubject("a3", &bob); err != nil { // re-upserted about bob
			return err
		}
		if _, err := tx.DeletePoint("a2"); err != nil {
			return err
		}
		return tx.SetSubject("b1", nil) // re-upserted about nobody
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *ReadTx) error {
		a, err := tx.SubjectPoints(alice)
		if err != nil || !slices.Equal(a, []string{"a1"}) {
			t.Errorf("alice's points %v, %v; want [a1]", a, err)
		}
		b, err := tx.SubjectPoints(bob)
		if err != nil || !slices.Equal(b, []string{"a3"}) {
			t.Errorf("bob's points %v, %v; want [a3]", b, err)
		}
		if h, ok, err := tx.Subject("a3"); err != nil || !ok || h != bob {
			t.Errorf("subject of a3: %x %v %v; want bob", h, ok, err)
		}
		if _, ok, err := tx.Subject("b1"); err != nil || ok {
			t.Errorf("b1 still has a subject (%v, %v)", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(func(tx *Tx) error { return tx.SetSubject("nope", &alice) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("subject of a point not stored: %v; want ErrInvalid", err)
	}
	if err := s.Apply(func(tx *Tx) error { return tx.Block(alice, []byte("[1]")) }); !errors.Is(err, ErrInvalid) {
		t.Errorf("a block record that is no object: %v; want ErrInvalid", err)
	}
	rec := []byte(`{"request":"r1"}`)
	if err := s.Apply(func(tx *Tx) error { return tx.Block(alice, rec) }); err != nil {
		t.Fatal(err)
	}
	err = s.Apply(func(tx *Tx) error {
		if got, ok, err := tx.Blocked(alice); err != nil || !ok || string(got) != string(rec) {
			t.Errorf("Blocked(alice) = %s %v %v", got, ok, err)
		}
		if _, ok, _ := tx.Blocked(bob); ok {
			t.Error("bob blocked")
		}
		if ok, err := tx.Unblock(alice); err != nil || !ok {
			t.Errorf("Unblock(alice) = %v, %v", ok, err)
		}
		if ok, err := tx.Unblock(alice); err != nil || ok {
			t.Errorf("second Unblock(alice) = %v, %v; want false", ok, err)
		}
		return tx.Block(bob, rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Check(); err != nil || !rep.OK || rep.Keys["subjects"] != 2 || rep.Keys["pointsubj"] != 2 || rep.Keys["blocked"] != 1 {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketPointSubj).Put([]byte("ghost"), bob[:]) })
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rep, err := s.Check(); err != nil || rep.OK {
		t.Fatalf("Check with a subject record of a point not stored: %+v, %v; want a problem", rep, err)
	}
}
