package replica

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/fault"
	"github.com/cairnhq/cairn/internal/query"
	"github.com/cairnhq/cairn/internal/serving"
	"github.com/cairnhq/cairn/stream"
)

// Config is what a Replica needs from the daemon.
type Config struct {
	Kafka stream.Config
	// Group is the replicas' consumer group (kafka.group), Topic the query topic.
	Group, Topic   string
	SessionTimeout time.Duration
	FetchMaxBytes  int
	// Writer writes the answers and dead letters straight to Kafka.
	Writer *stream.Writer
	// Fence waits until every models-topic record written before the call is applied
	// (the models-topic follower's fence).
	Fence func(ctx context.Context) error
	// Model waits for the first model, then returns the serving model with room in its
	// evaluation draw for n more answers (a fresh draw when the last is used up).
	Model   func(ctx context.Context, n int) (*serving.Model, error)
	Answers *query.Answerer
	Faults  *fault.Tracker
}

// Replica answers the query topic as one member of the replicas' consumer group.
type Replica struct {
	cfg  Config
	gr   *stream.GroupReader
	work serving.Workspace // the reader goroutine's
}

// New checks c and builds the group reader; it connects nothing.
func New(c Config) (*Replica, error) {
	gr, err := stream.NewGroupReader(stream.GroupReaderConfig{Kafka: c.Kafka, Group: c.Group, Topic: c.Topic,
		MaxBatch: 64, SessionTimeout: c.SessionTimeout, FetchMaxBytes: c.FetchMaxBytes})
	if err != nil {
		return nil, err
	}
	return &Replica{cfg: c, gr: gr}, nil
}

// Run answers queries until ctx ends; a failure (a broker that stopped answering, a
// write that failed) restarts the reader after a doubling wait (fault.Tracker
// KeepReading, component "queries"), from the group's committed offsets. It returns
// nil once ctx ends.
func (r *Replica) Run(ctx context.Context) error {
	return r.cfg.Faults.KeepReading(ctx, "queries", r.gr, r.handle, nil)
}

// handle answers one batch of the query topic: behind the deletion fence, on the
// serving model, written to Kafka before the group reader commits the batch.
func (r *Replica) handle(ctx context.Context, batch []stream.Message) error {
	if err := r.cfg.Fence(ctx); err != nil {
		return err
	}
	s, err := r.cfg.Model(ctx, len(batch))
	if err != nil {
		return err
	}
	outs := r.cfg.Answers.Batch(&r.work, s, batch, nil)
	// The answers' ce_time is when they were computed: a replica keeps no state, and a
	// batch it answers again after a restart is computed again.
	at := time.Now().UTC()
	msgs := make([]stream.Message, 0, len(batch))
	for _, o := range outs {
		if !o.Skip {
			msgs = append(msgs, stream.Message{Topic: o.Topic, Key: o.Key, Value: o.Value, Time: at})
		}
	}
	if err := r.cfg.Writer.Write(ctx, msgs...); err != nil {
		return err
	}
	r.cfg.Faults.Recovered("queries")
	r.cfg.Answers.Account(outs, s)
	return nil
}
