package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/admin"
	"github.com/cairnhq/cairn/stream"
)

// httpSecurity is the guard of the HTTP surface under cfg (http_tls, http_auth): the
// files are read by admin.Listen, which fails the start on a bad one (a token file
// others may read included). config.Validate has already refused an address beyond
// loopback without TLS and authentication.
func httpSecurity(cfg config.Config) admin.Security {
	return admin.Security{
		CertFile: cfg.HTTPTLS.CertFile, KeyFile: cfg.HTTPTLS.KeyFile,
		ClientCAFile: cfg.HTTPAuth.ClientCAFile, TokenFile: cfg.HTTPAuth.TokenFile,
		OpenPaths: cfg.HTTPAuth.OpenPaths, SessionTTL: cfg.HTTPAuth.SessionTTL,
	}
}

// warnPlaintextSASL logs, at every start, that kafka.allow_plaintext_sasl lets SASL
// run without TLS.
func (d *Daemon) warnPlaintextSASL() {
	k := d.cfg.Kafka
	if k.SASL.Mechanism != "" && !k.TLS.Enabled {
		d.log.Warn().Str("mechanism", k.SASL.Mechanism).Strs("brokers", k.Brokers).
			Msg("kafka.allow_plaintext_sasl: SASL credentials and every record cross the network to the brokers unencrypted")
	}
}

// checkTopics verifies, once the topics exist, that their settings keep erasure and the
// audit chain (stream.CheckTopics: the training, models and audits topics, and the
// erasures topic when the cluster has it). Under kafka.topic_policy "enforce" a problem
// (or a cluster that cannot be asked) fails the start with every problem named; under
// "warn" each is logged and /readyz answers 503 with them (readiness) for as long as
// the process runs: a fix is seen at the next start.
func (d *Daemon) checkTopics(ctx context.Context) error {
	err := stream.CheckTopics(ctx, d.kafka, d.topicRoles())
	if err == nil {
		d.recordPartitions(ctx)
		return nil
	}
	if d.cfg.Kafka.TopicPolicy != "warn" {
		return fmt.Errorf("daemon: refusing to start (kafka.topic_policy enforce; \"warn\" starts not ready instead): %w", err)
	}
	logged := false
	for _, e := range unjoin(err) {
		if p, ok := errors.AsType[*stream.TopicProblem](e); ok {
			d.log.Warn().Str("topic", p.Topic).Str("setting", p.Setting).Str("value", p.Value).Str("reason", p.Reason).
				Msg("topic setting breaks a guarantee (kafka.topic_policy warn: not ready)")
			logged = true
		}
	}
	if !logged {
		d.log.Warn().Err(err).Msg("topic settings not verified (kafka.topic_policy warn: not ready)")
	}
	err = fmt.Errorf("topics (kafka.topic_policy warn): %w", err)
	d.topicErr.Store(&err)
	d.recordPartitions(ctx)
	return nil
}

// unjoin lists the errors an errors.Join made (err itself otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
