package stream

import "context"

// inbox is where the partition goroutines' messages wait for a batch: a channel per
// partition, each with one sender (so each partition's order is kept), and a wake token
// a sender leaves after each message (wakes[i] is the token of partition i's receiver).
// A batch takes from the partitions in turn, at most its share of each per round
// (max/n), rounding again while messages wait, and starts one partition further each
// batch.
//
// With one shared channel, a batch was whatever the first sender to run after the last
// batch pushed: in a backlog, 251 messages of one partition and one of each other
// (measured on a primary with featurizers, 2026-11-28), so a primary that waits for
// its featurizers' records, which they compute for every partition, held the records
// of the other partitions meanwhile. Which partition's messages come first is in no
// contract: Kafka orders a partition, not a topic, and the state does not depend on how
// partitions interleave (ingest.StateHash).
//
// Each channel has one sender and each inbox one receiver (collect); send and collect
// are safe together.
type inbox struct {
	chs   []chan Message
	wake  chan struct{}   // this inbox's token
	wakes []chan struct{} // per partition, the token of the inbox that receives it (send's)
	// room holds a token for each message waiting in chs (nil after split): a sender
	// puts one before its message, the receiver takes one after each message.
	room chan struct{}
	max  int // a batch's bound (ReaderConfig.MaxBatch)
	next int // the partition the next batch starts at; the receiver's own
}

// newInbox makes an inbox of n partitions and batches of up to batch messages. Each
// partition's channel holds up to a batch, and the channels together up to two
// batches (room), as the one shared channel held one: a message of up to
// limits.max_message_bytes waits in them, on top of kafka-go's queue. So the partitions
// that have messages share the whole room, however few they are. (A channel of two
// shares each, 2·batch/n, gave the primary's training partitions a batch of room in
// all, as the shared channel had: half of its reader's partitions are the erasures
// topic's, nearly always empty. With two batches of room the ingest of a backlog kept
// closer to the feature rate: `cairnctl bench --backlog`, 2026-11-28.)
func newInbox(n, batch int) *inbox {
	in := &inbox{chs: make([]chan Message, n), wake: make(chan struct{}, 1), wakes: make([]chan struct{}, n),
		room: make(chan struct{}, 2*batch), max: batch}
	for i := range in.chs {
		in.chs[i] = make(chan Message, batch)
		in.wakes[i] = in.wake
	}
	return in
}

// split makes each of in's partitions received by an inbox of its own (Independent):
// its channel holds a whole batch (its share), with no room shared between them, and a
// sender of in wakes its partition's inbox. Senders keep sending through in. Call it
// before any send.
func (in *inbox) split() []*inbox {
	out := make([]*inbox, len(in.chs))
	in.room = nil
	for i := range in.chs {
		in.chs[i], in.wakes[i] = make(chan Message, in.max), make(chan struct{}, 1)
		out[i] = &inbox{chs: in.chs[i : i+1], wake: in.wakes[i], max: in.max}
	}
	return out
}

// send hands m from partition i's goroutine to its channel, waiting for room in the
// inbox and then in the channel, and leaves a wake token. It returns false when ctx
// ends first.
func (in *inbox) send(ctx context.Context, i int, m Message) bool {
	if in.room != nil {
		select {
		case in.room <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case in.chs[i] <- m:
	case <-ctx.Done():
		return false
	}
	select {
	case in.wakes[i] <- struct{}{}:
	default: // a token is there already
	}
	return true
}

// collect appends to batch the messages waiting (rounds), first waiting for one. It
// returns false when ctx ends first.
func (in *inbox) collect(ctx context.Context, batch []Message) ([]Message, bool) {
	if len(in.chs) == 0 { // a topic without partitions: nothing comes
		<-ctx.Done()
		return batch, false
	}
	for {
		if batch = in.rounds(batch); len(batch) > 0 {
			in.next = (in.next + 1) % len(in.chs)
			return batch, true
		}
		select {
		case <-ctx.Done():
			return batch, false
		case <-in.wake:
		}
	}
}

// rounds appends the waiting messages, up to max, in rounds over the partitions from
// in.next, taking at most max/n of each per round.
func (in *inbox) rounds(batch []Message) []Message {
	share := max(in.max/len(in.chs), 1)
	for len(batch) < in.max {
		before := len(batch)
		for k := range in.chs {
			ch := in.chs[(in.next+k)%len(in.chs)]
		take:
			for j := 0; j < share && len(batch) < in.max; j++ {
				select {
				case m := <-ch:
					batch = append(batch, m)
					if in.room != nil {
						<-in.room // its sender put one before it
					}
				default:
					break take
				}
			}
		}
		if len(batch) == before {
			break
		}
	}
	return batch
}
