package stream

import (
	"context"
	"net"
	"time"
)

// ResponseSlack is how long a partition reader waits for a fetch response beyond the
// fetch's MaxWait before it gives up on the connection.
//
// kafka-go's Reader sets the connection's read deadline to exactly MaxWait after it
// sends a fetch, and asks the broker to hold the fetch for about three quarters of
// that. A response with data must therefore arrive, whole header and all, within
// MaxWait of the request, or kafka-go treats the connection as broken, dials again
// and sends the same fetch from the same offset. A response that always takes longer
// than MaxWait to reach the reader (a remote broker whose round trip exceeds the
// query reader's 10 ms, or the embedded broker assembling 8 MiB of backlog on a
// loaded machine) is then never received: the reader reconnects forever and applies
// nothing. That livelock stopped TestKill9 under -race, where the embedded broker took
// 110–170 ms to assemble each 5.4–5.7 MB fetch against the training reader's 100 ms.
//
// Kafka's own consumer keeps the two apart (fetch.max.wait.ms against
// request.timeout.ms, 30 s). cairn does the same at the connection: every read
// deadline kafka-go sets on a reader's connection is moved ResponseSlack later. The
// broker still answers an idle fetch after its MaxWait, so an idle partition costs
// what it did; only a response that is late gets the time it needs. A broker that
// does not answer at all is noticed ResponseSlack later than before.
const ResponseSlack = 5 * time.Second

// patientConn is a net.Conn whose read deadlines are ResponseSlack later than asked
// (ResponseSlack). Write deadlines are unchanged.
type patientConn struct {
	net.Conn
	slack time.Duration
}

func (c patientConn) later(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(c.slack)
}

// SetDeadline sets the write deadline to t and the read deadline to t + slack.
func (c patientConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(c.later(t))
}

// SetReadDeadline sets the read deadline to t + slack (zero stays zero: no deadline).
func (c patientConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.later(t))
}

// patientDial dials as kafka-go's default dialer does (dual stack, the dialer's
// timeout through ctx) and wraps the connection in a patientConn.
func patientDial(slack time.Duration) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return patientConn{Conn: conn, slack: slack}, nil
	}
}
