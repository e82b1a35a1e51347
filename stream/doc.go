// Package stream is cairn's Kafka I/O (docs/events.md; docs/architecture.md, "Events" and
// "State and storage"): the event schema and its validation, partition readers that
// resume from offsets stored in bbolt, a writer with RequireAll acknowledgements and
// bounded retries, an outbox publisher, a dead-letter writer, and an embedded broker for
// the single-machine default mode. It knows nothing of the mathematics and nothing of
// bbolt: the daemon connects the two.
//
// # Events
//
// Input events (DecodeTrain, DecodeQuery) are validated completely before
// the caller sees them: one well-formed UTF-8 JSON object, "v" exactly 1,
// a known "op", len(x) equal to Limits.InputDim, every number finite (an
// overflowing literal such as 1e400 is non_finite; NaN is not JSON), the
// message within Limits.MaxBytes, ids and request ids non-empty, at most
// Limits.MaxIDBytes bytes, free of control characters and of U+FFFD. Keys
// match exactly (not case-insensitively, unlike encoding/json); a key given
// twice is duplicate_field, and an unknown key is unknown_field: strict,
// because a misspelt optional key must not silently drop data, and schema
// changes come with a new "v". Every rejection is a *RejectError with a
// Reason code (the dead-letter "reason") and a message naming the field and
// value. Decoders never panic on any input (fuzzed), and an accepted event
// re-encodes (EncodeTrain, EncodeQuery) to bytes that decode to the same
// value. Decoded events share no memory with the input.
//
// Data subjects. An upsert may name the data subject its point is about ("subject",
// validated as an id), and the erasures topic (DefaultErasuresTopic, keyed by subject)
// carries a subject's erasure and unblock requests (DecodeErasure, CheckErasureKey).
// A subject id is somebody's identity: no rejection message quotes it (a bad subject
// is named by its problem only, a key mismatch on the erasures topic by the key's
// length), so a dead letter cannot carry it in its message; MayNameSubject tells a
// caller that keeps raw bytes in dead letters which records must not be copied. An
// upsert of an erased subject is rejected by the daemon with ReasonSubjectErased.
//
// Output events (Attribution, Audit, Status, DeadLetter) are plain structs
// the daemon fills; Encode checks the required keys and finiteness and
// writes JSON with "v":1 first. Dead letters copy at most MaxDeadLetterRaw
// bytes of the rejected message (base64 in JSON) and its length.
//
// CloudEvents (binary content mode). A Writer with WriterConfig.Events stamps every
// record of the deployment's output topics with ce_specversion, ce_id (ContentID of
// the record), ce_source, ce_type, ce_time (the Message's Time: the Publisher passes
// each OutboxEntry's stored commit time, so a re-publication repeats it), ce_subject
// (the key), ce_dataschema and content-type; records that carry ce_ headers keep
// theirs. An input with any ce_ header must be a valid event (ParseCloudEvent, else
// ReasonBadHeader); DecodeQueryMessage takes a query's request id from its ce_id when
// the value names none.
//
// # Processing semantics
//
// A Reader's offsets live in the caller's store, never in Kafka: a Reader has no
// consumer group and commits nothing. It asks StartFunc for the last
// applied offset of each partition and starts at that offset + 1, so a
// caller that stores offsets in the same transaction as the state they
// describe applies every input exactly once across restarts. The handler
// runs on Run's goroutine only; messages of one partition arrive in offset
// order, and a batch takes the waiting messages of every partition in turn (at most
// MaxBatch/n of each per round), so no partition fills a batch while others wait
// (inbox.go). How partitions interleave is otherwise unspecified. A handler error
// stops Run and the batch counts as not consumed.
// kafka-go partition readers retry fetch errors internally (reported to
// ReaderConfig.OnError); note that kafka-go skips forward to the earliest
// retained offset if the stored offset has fallen out of retention.
//
// Two readers use Kafka's groups instead, where the caller has no store or wants
// Kafka to spread partitions: a GroupReader (the replicas' query reader) commits each
// batch's offsets to its consumer group after the handler returns (at least once), and
// an Election assigns the one partition of a leader topic to one member of a group
// (leadership; its only offsets are the leader's beat, a changing offset the leader
// commits under its generation so that the other members can tell a live leader from a
// dead member the coordinator still lists, see Election).
//
// Writer.Write returns nil only when every message was acknowledged by all
// in-sync replicas, else an error after WriterConfig.Attempts tries or when
// ctx ends; it re-sends only the failed messages. Partitions are chosen by
// key (murmur2). The Publisher drains an Outbox (write, then Ack), so an
// output is delivered at least once, possibly twice with the same key and
// value after a crash between write and ack, and never lost. Publisher.Run never
// gives up: a failed round (broker unreachable, outbox unreadable, ack not committed)
// is retried with a wait doubling from RetryMin to RetryMax, the entries stay in the
// outbox and go out in order when the fault clears, and Publisher.State reports the
// failure meanwhile (for readiness and metrics). stream defines
// its own OutboxEntry; storage.OutboxEntry has its fields but Headers (record
// headers, which the store does not keep), so an adapter copies the other four.
//
// EndOffsets reports a topic's high watermarks (the offset the next message of each
// partition will get): the daemon's consumer lag and clients that want only messages
// newer than "now" (StartAt turns captured end offsets into a StartFunc) use it.
//
// # Embedded broker and durability
//
// StartBroker runs kfake (franz-go's in-process Kafka) as one broker
// speaking the real protocol over TCP on the configured address, and
// creates missing topics through the protocol (CreateTopics), on every
// start. With BrokerConfig.DataDir set, kfake persists topics, record
// segments, offsets, and group state in that directory and reloads them on
// the next start, so records written before a restart are read again at
// the same offsets (tested). Records are fsynced per batch only with
// SyncWrites; otherwise an acknowledged record survives a clean Close (which
// flushes) but may be lost if the machine crashes. Without DataDir the
// broker keeps nothing: after a restart the topics are re-created empty and
// offsets restart at 0, so Reader.Run refuses to resume from a stored
// offset beyond a partition's end (ErrOffsetAhead) instead of silently
// skipping the new messages; the durable state is then
// bbolt alone (state, consumed offsets and the outbox, so no output is
// lost: unacked outputs are re-sent), and inputs not yet consumed are lost
// with the broker. Topics added to the configuration are created even when
// DataDir is reloaded; partition counts of existing topics are not changed.
// Broker.Compact rewrites only the segment files that lose a record (cairn's copy of
// kfake, third_party/kfake; segments of 1 MiB): one erasure rewrites about one
// segment of the partition that holds its key, not the topic. The files of a segment
// are replaced one by one, so with a DataDir the rewrite is guarded by hard links made
// first (compactguard.go): a process killed during a compaction restarts with
// the partitions as they were before it, and StartBroker finishes the compaction
// before serving (without the guard such a kill left the partition empty, its
// acknowledged records lost). Compaction runs only when Compact is called: kfake's own
// periodic cleaner (log.cleaner.backoff.ms, an hour by default) is turned off, since it
// would run unguarded and whatever the owner's consumers have read.
//
// # Security and topic settings
//
// Config.Validate refuses a SASL mechanism (PLAIN or SCRAM) without TLS unless
// Config.AllowPlaintextSASL says the network is trusted. CheckTopics reads the
// effective settings of the training, models, audits and (when it exists) erasures
// topics through DescribeConfigs and Metadata, and reports every one that cannot keep
// erasure or the audit chain as a *TopicProblem matching ErrTopicSettings (its doc
// lists the rules). kfake answers DescribeConfigs like Kafka, with its defaults
// (cleanup.policy delete, retention.ms a week) for settings a topic does not set, so
// the same check runs on the embedded broker.
//
// # Lifecycle and concurrency
//
// Reader.Run and Publisher.Run block, own every goroutine they start, and
// return only after those have exited. Writer is safe for concurrent use;
// Close on Writer and Broker is idempotent. Broker.Close returns when
// kfake's Close returns; kfake does not join its per-connection goroutines,
// which exit when their connections close. Configs have Validate methods
// that report every problem at once, each wrapping ErrConfig.
package stream
