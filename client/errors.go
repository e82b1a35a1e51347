package client

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/internal/receipt"
	"github.com/cairnhq/cairn/stream"
)

var (
	// ErrConfig matches every problem Config.Validate reports.
	ErrConfig = errors.New("client: invalid configuration")
	// ErrNoBrokers is returned by the Kafka methods of a client configured without
	// brokers (an HTTP-only client).
	ErrNoBrokers = errors.New("client: no Kafka brokers configured")
	// ErrClosed is returned by the Kafka requests of a closed client, and to requests
	// still waiting for their answer when it is closed.
	ErrClosed = errors.New("client: closed")
	// ErrNoAnswer is returned when a request's answer (or its dead letter) did not
	// arrive before the context or Config.AnswerTimeout ended.
	ErrNoAnswer = errors.New("no answer")
	// ErrDeadLettered matches a *DeadLetterError: the daemon rejected the request.
	ErrDeadLettered = errors.New("rejected by the daemon")
	// ErrUnreachable is returned when the daemon's HTTP address does not answer.
	ErrUnreachable = errors.New("daemon not reachable")
	// ErrUnauthorized is returned when the daemon's HTTP surface refuses the request
	// for want of credentials (HTTP 401).
	ErrUnauthorized = errors.New("the daemon's HTTP surface needs authentication")
	// ErrNotJSON is returned when an HTTP answer is not JSON (the address is not a
	// cairn daemon).
	ErrNotJSON = errors.New("answer is not JSON")
	// ErrLocked is returned when a stopped daemon's state file is locked: the daemon
	// is still running on that data directory.
	ErrLocked = errors.New("is the daemon running on this data directory?")
	// ErrSchema is returned, with the value holding the raw answer, when an answer is
	// JSON but does not decode into the type this package knows (a daemon of another
	// version).
	ErrSchema = errors.New("answer does not match the schema")
	// ErrNoReceipt is returned by Client.Receipt when no record of the audit topic
	// answers the request: it is not audited yet, or there is no such request.
	ErrNoReceipt = receipt.ErrNotFound
)

// DeadLetterError is a request the daemon dead-lettered instead of answering: the
// dead letter's reason and message, and the dead-letter event as received.
type DeadLetterError struct {
	Request    string
	DeadLetter stream.DeadLetter
	// Raw is the dead-letter event's bytes as the daemon wrote them.
	Raw []byte
}

func (e *DeadLetterError) Error() string {
	return fmt.Sprintf("request %s rejected by the daemon (%s): %s", e.Request, e.DeadLetter.Reason, e.DeadLetter.Message)
}

// Is reports whether target is ErrDeadLettered.
func (e *DeadLetterError) Is(target error) bool { return target == ErrDeadLettered }
