package storage

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// poolPoints reads every pool record by id.
func poolPoints(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.View(func(tx *ReadTx) error {
		return tx.ForEachPoolPoint(func(id string, rec []byte) error { out[id] = string(rec); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPoolPointLifecycle: a record needs its point, survives PutPoint (which does not
// touch it), reopen and Compact, is removed with its point by DeletePoint, and the
// argument checks name what is wrong.
func TestPoolPointLifecycle(t *testing.T) {
	s, _ := openTemp(t)
	arg := []byte("rec-a")
	err := s.Apply(func(tx *Tx) error {
		for _, id := range []string{"a", "b", "c"} {
			if err := tx.PutPoint(Point{ID: id, X: []float64{1}}); err != nil {
				return err
			}
		}
		if err := tx.PutPoolPoint("a", arg); err != nil {
			return err
		}
		arg[0] = 'X' // encoded at the call: reusing arg is allowed
		if rec, ok, err := tx.PoolPoint("a"); err != nil || !ok || string(rec) != "rec-a" {
			t.Errorf("PoolPoint(a) inside the tx = %q, %v, %v; want rec-a", rec, ok, err)
		}
		if err := tx.PutPoolPoint("b", []byte("rec-b")); err != nil {
			return err
		}
		return tx.PutPoolPoint("c", bytes.Repeat([]byte{7}, MaxPoolPointLen)) // the limit itself is accepted
	})
	if err != nil {
		t.Fatal(err)
	}
	if hold, err := s.ScrubPending(); err != nil || hold {
		t.Errorf("ScrubPending after PutPoolPoint = %v, %v; want false", hold, err)
	}
	for _, tc := range []struct {
		name string
		fn   func(tx *Tx) error
		want string
	}{
		{"no point", func(tx *Tx) error { return tx.PutPoolPoint("zz", []byte("x")) }, `pool point record of "zz": no such stored point`},
		{"empty id", func(tx *Tx) error { return tx.PutPoolPoint("", []byte("x")) }, "pool point id is empty"},
		{"too long", func(tx *Tx) error { return tx.PutPoolPoint("a", make([]byte, MaxPoolPointLen+1)) }, `pool point record of "a" is 257 bytes, longer than 256`},
		{"read empty id", func(tx *Tx) error { _, _, err := tx.PoolPoint(""); return err }, "pool point id is empty"},
	} {
		err := s.Apply(tc.fn)
		if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: err = %v; want ErrInvalid containing %q", tc.name, err, tc.want)
		}
	}
	want := map[string]string{"a": "rec-a", "b": "rec-b", "c": string(bytes.Repeat([]byte{7}, MaxPoolPointLen))}
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after refused writes = %q, want %q", got, want)
	}
	// Replacing a point leaves its record; deleting a point removes it; a record
	// put after the point's delete in the same tx is refused.
	err = s.Apply(func(tx *Tx) error {
		if err := tx.PutPoint(Point{ID: "a", X: []float64{2}}); err != nil {
			return err
		}
		if existed, err := tx.DeletePoint("b"); err != nil || !existed {
			t.Errorf("DeletePoint(b) = %v, %v", existed, err)
		}
		if _, ok, err := tx.PoolPoint("b"); err != nil || ok {
			t.Errorf("PoolPoint(b) after DeletePoint in the tx = %v, %v; want absent", ok, err)
		}
		if err := tx.PutPoolPoint("b", []byte("again")); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutPoolPoint(b) after its DeletePoint = %v, want ErrInvalid", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "b")
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after delete = %q, want %q", got, want)
	}
	s = reopen(t, s)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := poolPoints(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("records after reopen and Compact = %q, want %q", got, want)
	}
}
