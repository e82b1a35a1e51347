package stream

import "errors"

// Sentinel errors. Callers classify failures with errors.Is.
var (
	// ErrRejected marks an input event that failed validation. Every
	// *RejectError matches it; the typed error carries the reason code.
	ErrRejected = errors.New("stream: event rejected")

	// ErrConfig marks an invalid Config, ReaderConfig, WriterConfig or
	// BrokerConfig. Validate joins one error per problem, each wrapping it.
	ErrConfig = errors.New("stream: invalid configuration")

	// ErrWriteFailed is returned by Writer.Write when a message could not be
	// acknowledged by the broker within the configured number of attempts.
	// The messages that were not acknowledged are named in the error; none
	// is dropped silently.
	ErrWriteFailed = errors.New("stream: write failed")

	// ErrNoPartitions is returned when the broker metadata lists a topic
	// without partitions or does not know the topic.
	ErrNoPartitions = errors.New("stream: topic has no partitions")

	// ErrOffsetAhead is returned by Reader.Run when a stored offset lies
	// beyond the end of its partition: the topic was re-created and its
	// offsets restarted, and resuming would silently skip new messages.
	ErrOffsetAhead = errors.New("stream: stored offset beyond partition end")

	// ErrClosed is returned by operations on a closed Writer or Broker.
	ErrClosed = errors.New("stream: closed")

	// ErrTopicSettings marks a topic whose settings cannot keep erasure or the audit
	// chain (CheckTopics). Every *TopicProblem matches it and names the setting.
	ErrTopicSettings = errors.New("stream: topic settings break a guarantee")
)
