package stream

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReaderLateFetchResponses is the livelock that stopped TestKill9 under -race: a
// broker whose every fetch response reaches the reader later than the fetch's MaxWait.
// kafka-go alone gives up on each such response at MaxWait, reconnects and asks again
// from the same offset, forever; with patientConn's ResponseSlack the reader must get
// every message. The broker holds each fetch 3× MaxWait before it answers (a kfake
// control that sleeps off the cluster's goroutine).
func TestReaderLateFetchResponses(t *testing.T) {
	b := startBroker(t, 2, "late")
	const maxWait = 50 * time.Millisecond
	b.c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.c.KeepControl()
		b.c.SleepControl(func() { time.Sleep(3 * maxWait) })
		return nil, nil, false
	})
	const n = 40
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = msgKeyVal("late", i)
	}
	w := newTestWriter(t, b.Addr(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	var fetchErrs atomic.Int64
	r, err := NewReader(ReaderConfig{Kafka: Config{Brokers: []string{b.Addr()}}, Topics: []string{"late"}, MaxWait: maxWait,
		Start: storedOffsets{}.start, OnError: func(string, int, error) { fetchErrs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, r, newCollector(n), 20*time.Second)
	if len(got) != n {
		t.Fatalf("got %d of %d messages through fetch responses 3× later than MaxWait (%d fetch errors)", len(got), n, fetchErrs.Load())
	}
	checkPartitionOrder(t, got)
}

// TestPatientConnDeadlines checks the arithmetic: read deadlines move by the slack,
// write deadlines do not, and zero (no deadline) stays zero.
func TestPatientConnDeadlines(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	rec := &deadlineConn{Conn: a}
	c := patientConn{Conn: rec, slack: 3 * time.Second}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		set         func() error
		read, write time.Time
	}{
		{"SetReadDeadline", func() error { return c.SetReadDeadline(t0) }, t0.Add(3 * time.Second), time.Time{}},
		{"SetWriteDeadline", func() error { return c.SetWriteDeadline(t0) }, time.Time{}, t0},
		{"SetDeadline", func() error { return c.SetDeadline(t0) }, t0.Add(3 * time.Second), t0},
		{"SetDeadline zero", func() error { return c.SetDeadline(time.Time{}) }, time.Time{}, time.Time{}},
	} {
		*rec = deadlineConn{Conn: a}
		if err := tc.set(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !rec.read.Equal(tc.read) || !rec.write.Equal(tc.write) {
			t.Errorf("%s: read deadline %v, write %v; want %v, %v", tc.name, rec.read, rec.write, tc.read, tc.write)
		}
	}
}

// deadlineConn records the deadlines set on it.
type deadlineConn struct {
	net.Conn
	read, write time.Time
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error  { d.read = t; return nil }
func (d *deadlineConn) SetWriteDeadline(t time.Time) error { d.write = t; return nil }
func (d *deadlineConn) SetDeadline(t time.Time) error      { d.read, d.write = t, t; return nil }
