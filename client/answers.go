package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cairnhq/cairn/stream"
)

// answers is a client's one reader of its answer topics (attributions, audits and
// dead letters): it hands each message to the request waiting for it. It starts with
// the first request that waits and runs until the client is closed, or until its
// reader fails (every waiter then gets the error, and the next request starts another):
// a reader started per request would add its start-up (about 0.2 s on the embedded
// broker) to every answer.
type answers struct {
	mu      sync.Mutex
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the dispatching goroutine has exited
	waiting map[string]*waiter
}

// waiter is one request waiting for its answer.
type waiter struct {
	s  Sent
	ch chan result // buffered: the dispatcher never blocks on it
}

type result struct {
	m   stream.Message
	err error
}

// wait registers s, starting the reader (watching the client's answer topics from
// their current end) when none runs. Register before sending, so the answer cannot
// be missed; release the waiter with forget.
func (a *answers) wait(ctx context.Context, c *Client, s Sent) (*waiter, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	if _, dup := a.waiting[s.Request]; dup {
		return nil, fmt.Errorf("client: request %s is already waiting for its answer", s.Request)
	}
	if a.done == nil || isClosed(a.done) {
		t := c.cfg.Topics
		w, err := c.Watch(ctx, t.Attributions, t.Audits, t.DLQ)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithCancel(context.Background())
		a.cancel, a.done, a.waiting = cancel, make(chan struct{}), map[string]*waiter{}
		go a.dispatch(rctx, w, t.DLQ, a.done)
	}
	wt := &waiter{s: s, ch: make(chan result, 1)}
	a.waiting[s.Request] = wt
	return wt, nil
}

// forget releases wt.
func (a *answers) forget(wt *waiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting[wt.s.Request] == wt {
		delete(a.waiting, wt.s.Request)
	}
}

// dispatch reads w until ctx ends or the reader fails, handing answers and dead
// letters to their waiters; it closes w and then done.
func (a *answers) dispatch(ctx context.Context, w *Watcher, dlq string, done chan struct{}) {
	defer close(done)
	defer w.Close()
	for {
		m, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				err = ErrClosed
			}
			a.mu.Lock()
			for _, wt := range a.waiting {
				wt.deliver(result{err: err})
			}
			a.mu.Unlock()
			return
		}
		a.mu.Lock()
		if m.Topic == dlq {
			var dl stream.DeadLetter
			if json.Unmarshal(m.Value, &dl) == nil {
				for _, wt := range a.waiting {
					if deadLetterOf(dl, wt.s.Topic, wt.s.Key, wt.s.Value) {
						wt.deliver(result{err: &DeadLetterError{Request: wt.s.Request, DeadLetter: dl, Raw: m.Value}})
					}
				}
			}
		} else if wt := a.waiting[string(m.Key)]; wt != nil && wt.s.answeredBy(m) {
			wt.deliver(result{m: m})
		}
		a.mu.Unlock()
	}
}

// close stops the reader and waits for it; it is idempotent.
func (a *answers) close() {
	a.mu.Lock()
	a.closed = true
	cancel, done := a.cancel, a.done
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// deliver hands r to the waiter unless it already has a result.
func (wt *waiter) deliver(r result) {
	select {
	case wt.ch <- r:
	default:
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
