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
// # Validation
//
// Validate reports every problem in one joined error; each is a *FieldError naming the
// YAML path and the offending value. Loading never validates: callers validate once, after
// the last layer.
//
// Config values are plain data, safe to copy; nothing here reads the environment or the
// file system except Load (given its arguments).
package config
