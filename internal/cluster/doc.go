// Package cluster is cairnd's side of the Kafka cluster at start and while it runs:
// the client configuration under the daemon's configuration (KafkaConfig, TLS and SASL
// included), the topics it creates and their settings (TopicConfigs), the embedded
// broker of the default mode (DataDir/kafka), and the guard on the topics' settings.
//
// # Guards
//
// With kafka.allow_plaintext_sasl a warning is logged at every start. Once the topics
// exist (every role, either broker), stream.CheckTopics judges the training, models,
// audits and erasures topics' settings: under kafka.topic_policy enforce a problem ends
// the start with every setting named; under warn each is logged and the readiness
// reports them (Conn.TopicsErr: /readyz answers 503) until a later check finds them
// fixed. Topics cairnd creates get TopicConfigs, which pass. While the daemon runs,
// Conn.Watch reads the checked topics' partition counts every
// kafka.topic_check_interval; when they change it checks the topics again, and a
// training topic whose count changed (tombstones would miss earlier upserts) or a
// setting that now breaks a guarantee makes the readiness fail with the reason under
// either policy (a running daemon cannot refuse to start).
//
// # Contracts
//
// Connect waits for an external broker (retried with a doubling wait, reported as the
// fault "broker") until its context ends; a configuration the broker refuses ends it
// at once. The Conn it returns owns the embedded broker until Close. TopicsErr is safe
// for concurrent use with Watch, which blocks until its context ends.
package cluster
