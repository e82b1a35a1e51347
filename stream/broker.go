package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// BrokerConfig configures the embedded single-node broker of the default
// mode.
type BrokerConfig struct {
	// Addr is the host:port to listen on; port 0 picks a free port (tests).
	Addr string
	// Topics are created on start if missing, with Partitions partitions and the
	// settings TopicConfigs[topic].
	Topics       []string
	Partitions   int
	TopicConfigs map[string]map[string]string
	// DataDir, if set, makes the broker persist topics, records and
	// offsets there and reload them on the next start. Empty: memory only.
	DataDir string
	// SyncWrites fsyncs every produced batch before acknowledging it.
	// Without it an acknowledged record survives a broker restart (Close
	// flushes) but may be lost if the machine crashes.
	SyncWrites bool
}

// Validate reports every problem at once.
func (c BrokerConfig) Validate() error {
	var errs []error
	if host, port, err := net.SplitHostPort(c.Addr); err != nil || host == "" {
		errs = append(errs, fmt.Errorf("%w: broker.addr %q: want host:port", ErrConfig, c.Addr))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("%w: broker.addr %q: port %q not in [0, 65535]", ErrConfig, c.Addr, port))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("%w: broker.partitions %d: must be at least 1", ErrConfig, c.Partitions))
	}
	for i, t := range c.Topics {
		if err := validTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("%w: broker.topics[%d] %q: %v", ErrConfig, i, t, err))
		}
	}
	return errors.Join(errs...)
}

// Broker is an in-process Kafka broker (kfake) speaking the real protocol
// over TCP on loopback or the configured host. It is for the default
// single-machine mode and for tests; see the package documentation for
// what it keeps across restarts.
type Broker struct {
	c       *kfake.Cluster
	addr    string
	dataDir string // "" without persistence

	compactMu sync.Mutex // one compaction at a time: they share the guard directory
	// restored says StartBroker found an interrupted compaction and undid it.
	restored bool

	once sync.Once
}

// RestoredCompaction says StartBroker found a compaction interrupted by a crash and put
// the partitions back as they were before it (then compacted again).
func (b *Broker) RestoredCompaction() bool { return b.restored }

// StartBroker starts the broker and creates the configured topics that do
// not exist yet. On failure nothing is left running.
func StartBroker(ctx context.Context, cfg BrokerConfig) (_ *Broker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(cfg.Addr)
	p, _ := strconv.Atoi(port)
	restored := false
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(p),
		// kfake always listens on 127.0.0.1; honour the configured host.
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, port))
		}),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.ClusterID("cairn-embedded"),
		// Kafka's default minimum is 6 s; the embedded broker accepts the 1 s that
		// kafka.session_timeout allows, so tests and demos fail over quickly.
		kfake.GroupMinSessionTimeout(time.Second),
		// kfake compacts every log.cleaner.backoff.ms (an hour by default) on its own:
		// unguarded (compactguard.go) and whatever its consumers have read. Compaction is
		// Compact's alone: the owner calls it when it knows what it may erase.
		//
		// Segments of segmentBytes: compaction rewrites only the segments that lose a
		// record (third_party/kfake/compact.go), so a deletion rewrites about one
		// segment of the partition that holds its id.
		kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": noCleanerMs, "log.segment.bytes": segmentBytes}),
	}
	if cfg.DataDir != "" {
		if restored, err = restoreGuard(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("stream: embedded broker: undo an interrupted compaction in %s: %w", cfg.DataDir, err)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream: start embedded broker on %s: %w", cfg.Addr, err)
	}
	b := &Broker{c: c, addr: c.ListenAddrs()[0], dataDir: cfg.DataDir, restored: restored}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	// Topics are created through the protocol, as on a real cluster: a broker reloading
	// its DataDir keeps what it had, with its settings.
	if len(cfg.Topics) > 0 {
		if err := EnsureTopicsWithConfigs(ctx, Config{Brokers: []string{b.addr}}, cfg.Partitions, -1, cfg.TopicConfigs, cfg.Topics...); err != nil {
			return nil, err
		}
		// Only the topics this start ensures: TopicConfigs may also hold the settings
		// of topics a daemon creates later (the lineage and erasures topics).
		mine := map[string]map[string]string{}
		for _, t := range cfg.Topics {
			if c, ok := cfg.TopicConfigs[t]; ok {
				mine[t] = c
			}
		}
		if err := setTopicConfigs(ctx, b.addr, mine); err != nil {
			return nil, err
		}
	}
	if restored {
		// The interrupted compaction was erasing records (a deletion's upserts): finish
		// it before anyone reads the restored partitions.
		if err := b.Compact(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// noCleanerMs is kfake's cleaner interval in milliseconds, about a century: never.
const noCleanerMs = "3153600000000"

// segmentBytes is the size at which the embedded broker starts a new segment file of a
// partition (kfake's default is 100 MiB): what one erasure rewrites is about a
// segment, and a partition of n points holds about n × 2.5 KB / segmentBytes files
// (about 150 per partition of 60,000 MNIST points over four partitions). 256 KiB keeps
// one non-landmark deletion's broker writes at n = 10,000 near 0.4 MB on the training
// topic (1.5 MB with 1 MiB segments; scripts/erasure-bytes).
const segmentBytes = "262144"

// Compact runs log compaction now on every topic whose cleanup.policy is compact: of
// each key only the newest record stays (a null value, a tombstone, for
// delete.retention.ms), except in each partition's last batch, which is kept whole.
// The partition files are rewritten, so superseded records leave them. With a DataDir
// the rewrite is guarded (compactguard.go): a process killed during it restarts with the
// partitions as they were before, not empty. A guard that cannot be made is returned
// and nothing is compacted. Concurrent calls run one after the other.
func (b *Broker) Compact() error {
	b.compactMu.Lock()
	defer b.compactMu.Unlock()
	if b.dataDir == "" {
		b.c.Compact()
		return nil
	}
	if err := guardPartitions(b.dataDir); err != nil {
		return err
	}
	b.c.Compact()
	return releaseGuard(b.dataDir)
}

// Addr is the address the broker listens on (with the chosen port when the
// configured port was 0).
func (b *Broker) Addr() string { return b.addr }

// Close stops accepting connections, persists state when a DataDir is
// set, and returns once kfake's Close has returned. It is idempotent.
//
// kfake's Close closes the listeners and its run loop but does not wait
// for per-connection goroutines; those end on their own when their
// connections fail, which clients see as a broker going away.
func (b *Broker) Close() error {
	b.once.Do(b.c.Close)
	return nil
}

// setTopicConfigs sets the settings of existing topics (a broker reloading an older
// DataDir keeps the settings its topics were created with).
func setTopicConfigs(ctx context.Context, addr string, configs map[string]map[string]string) error {
	if len(configs) == 0 {
		return nil
	}
	req := &kafka.IncrementalAlterConfigsRequest{}
	for _, topic := range slices.Sorted(maps.Keys(configs)) {
		r := kafka.IncrementalAlterConfigsRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}
		for _, k := range slices.Sorted(maps.Keys(configs[topic])) {
			r.Configs = append(r.Configs, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: configs[topic][k],
				ConfigOperation: kafka.ConfigOperationSet})
		}
		req.Resources = append(req.Resources, r)
	}
	resp, err := (&kafka.Client{Addr: kafka.TCP(addr)}).IncrementalAlterConfigs(ctx, req)
	if err != nil {
		return fmt.Errorf("stream: set topic configs: %w", err)
	}
	var errs []error
	for _, r := range resp.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("stream: set configs of topic %q: %w", r.ResourceName, r.Error))
		}
	}
	return errors.Join(errs...)
}
