// Package metrics holds cairnd's Prometheus metrics, on client_golang with a registry
// of its own (never the global default one): Set records what the daemon does through
// a few typed methods, and Handler serves the registry in the text exposition format
// for /metrics.
//
// # Families
//
// Every family name, type, label and histogram bucket is part of the operator's
// contract (dashboards and alerts depend on them): cairn_events_total{topic,result},
// cairn_rejects_total{reason}, cairn_consumer_lag{topic,partition},
// cairn_pool_points, cairn_pool_landmarks, cairn_residual_trace{view},
// cairn_kernel_trace{view}, cairn_residual_exact{view}, cairn_model_version,
// cairn_model_masked_landmarks, cairn_refits_total{result}, cairn_refit_seconds,
// cairn_queries_total{verdict}, cairn_query_seconds, cairn_deletions_total{landmark},
// cairn_deletions_unknown_total, cairn_audits_total, cairn_deletion_to_audit_seconds,
// for data subjects' requests cairn_erasure_requests_total{op},
// cairn_erased_points_total, cairn_erasures_pending and cairn_erasure_seconds (request
// timestamp to the audit's acknowledgement: the erasure deadline), and for faults
// cairn_outbox_entries, cairn_publish_retries_total, cairn_broker_up and
// cairn_fault_retries_total{component}; with the Go runtime's (go_goroutines,
// go_memstats_*) and, on Linux, the process's (process_start_time_seconds, …).
//
// # Concurrency and cost
//
// Every method is safe for concurrent use. Updating an existing series takes
// client_golang's lock-free path (a label lookup and an atomic add); label values are
// taken as given, and callers pass values from small fixed sets (configured topics,
// reject reasons, verdicts, views, component names), because every distinct value is a
// series kept for the life of the process. A negative count is a programmer error and
// panics, as client_golang's counters do.
package metrics
