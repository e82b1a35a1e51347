// Package config is cairnd's configuration: one Config struct with documented defaults
// (Default: the embedded mode on MNIST-shaped data), loaded in layers and validated at once.
//
// # Layers
//
// Default() < YAML file (--config) < CAIRN_* environment variables < explicitly given flags.
// The YAML decoder rejects unknown keys, and an unknown CAIRN_* variable is an error, so a
// misspelt setting is reported instead of silently ignored. The environment name of a field
// is CAIRN_ plus its YAML path upper-cased with "." → "_" (CAIRN_SKETCH_H, CAIRN_KAFKA_BROKERS
// as a comma-separated list, durations in time.ParseDuration syntax).
//
// # Environment
//
// cairn has one environment namespace, CAIRN_. A daemon setting is CAIRN_ plus its YAML
// path as above; the data loaders read their own variables, listed by dataset.EnvVars
// (CAIRN_MNIST_DIR, CAIRN_FASHION_MNIST_DIR), and cairnctl reads the same two. Load
// knows both kinds: a loader variable never stops the daemon from starting, and any
// other CAIRN_ name is an error that suggests the nearest known name when there is one
// (CAIRN_SKETCH_HH: "did you mean CAIRN_SKETCH_H?"). Variables without the prefix are
// ignored.
//
// # Validation
//
// Validate reports every problem in one joined error; each is a *FieldError naming the
// YAML path and the offending value. Loading never validates: callers validate once, after
// the last layer.
//
// # Security rules Validate enforces
//
//   - An HTTP address beyond loopback (LoopbackAddr false: "0.0.0.0", an empty host, any
//     name but localhost) needs both http_tls (cert_file, key_file) and http_auth
//     (token_file, client_ca_file or both); on loopback neither is needed, and whichever
//     is set applies there too. http_auth.open_paths may name only /healthz, /readyz,
//     /metrics and /schemas/ (the events' JSON Schemas). The files themselves (the token file's mode 0600 or stricter, the PEM
//     contents) are checked by internal/admin when cairnd starts.
//   - A SASL mechanism needs kafka.tls.enabled, unless kafka.allow_plaintext_sasl is set
//     (cairnd then warns at start).
//   - kafka.topic_policy is "enforce" or "warn"; what it enforces is stream.CheckTopics.
//
// # Reference
//
// docs/configuration.md lists every setting with its YAML key, environment variable,
// flag, default and meaning. It is generated from Config (Settings, and each field's
// doc comment), and TestConfigurationDoc fails when it is stale: after adding or
// changing a setting, document the field and run go generate ./config.
//
// Config values are plain data, safe to copy; nothing here reads the environment or the
// file system except Load (given its arguments).
package config

//go:generate go test -run TestConfigurationDoc -update
