package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/admin"
	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/stream"
)

// Config says how to reach a daemon and what it accepts. FromDaemon derives one from
// the daemon's own configuration.
type Config struct {
	// Kafka reaches the daemon's brokers (TLS and SASL included). With no Brokers the
	// client is HTTP-only and its Kafka methods return ErrNoBrokers.
	Kafka stream.Config
	// Topics are the daemon's topic names; an empty name is the default's
	// (config.Default().Kafka.Topics).
	Topics config.Topics
	// Limits are what the daemon accepts in an input event; zero fields are stream's
	// defaults. InputDim 0 accepts a vector of any width (each event is checked at its
	// own width); set it to the daemon's model input to refuse other widths here.
	Limits stream.Limits
	// HTTP reaches the daemon's HTTP surface.
	HTTP HTTP
	// AnswerTimeout bounds the wait for an answer or an audit once its request was
	// sent (0: the context alone bounds it).
	AnswerTimeout time.Duration
	// OnReadError, if set, is told of each error reading an output topic (the read is
	// retried). It is called from reader goroutines and must be safe for concurrent use.
	OnReadError func(topic string, partition int, err error)
}

// HTTP says where the daemon's HTTP surface is and how to authenticate to it and trust
// it (the daemon's http_auth settings seen from the client).
type HTTP struct {
	// Addr is host:port or a URL; a bare host:port means http, or https when CAFile or
	// a client certificate is given.
	Addr string
	// TokenFile holds the bearer token (mode 0600 or stricter).
	TokenFile string
	// CAFile is a PEM bundle of the CAs trusted for the daemon's certificate.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key (mutual TLS).
	CertFile, KeyFile string
}

func (h HTTP) options() admin.ClientOptions {
	return admin.ClientOptions{TokenFile: h.TokenFile, CAFile: h.CAFile, CertFile: h.CertFile, KeyFile: h.KeyFile}
}

// base is the daemon's base URL: Addr with a scheme and without a trailing slash.
func (h HTTP) base() string {
	addr := strings.TrimSuffix(h.Addr, "/")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	if h.options().TLS() {
		return "https://" + addr
	}
	return "http://" + addr
}

// FromDaemon is the Config of a client of the daemon that runs cfg: its Kafka
// connection (daemon.KafkaConfig: TLS and SASL) to brokers, or when brokers is empty
// to cfg's external brokers, else to its embedded broker; its topic names; its input
// limits as the daemon builds them (ingest.TrainLimits, with the rankings of package
// certify as the names a query's score may take, InputDim left 0); and its HTTP
// address.
func FromDaemon(cfg config.Config, brokers []string) (Config, error) {
	kc := daemon.KafkaConfig(cfg)
	switch {
	case len(brokers) > 0:
	case len(cfg.Kafka.Brokers) > 0:
		brokers = cfg.Kafka.Brokers
	case cfg.Kafka.EmbeddedBroker != "":
		brokers = []string{cfg.Kafka.EmbeddedBroker}
	}
	kc.Brokers = append([]string(nil), brokers...)
	lim, err := ingest.TrainLimits(cfg, 1)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	lim.InputDim = 0
	for _, r := range certify.Rankings {
		lim.Scores = append(lim.Scores, string(r))
	}
	return Config{Kafka: kc, Topics: cfg.Kafka.Topics, Limits: lim, HTTP: HTTP{Addr: cfg.HTTP}}, nil
}

// withDefaults fills the empty topic names.
func (c Config) withDefaults() Config {
	d := config.Default().Kafka.Topics
	for _, t := range []struct {
		p *string
		d string
	}{
		{&c.Topics.Train, d.Train}, {&c.Topics.Queries, d.Queries}, {&c.Topics.Attributions, d.Attributions},
		{&c.Topics.Audits, d.Audits}, {&c.Topics.DLQ, d.DLQ}, {&c.Topics.Status, d.Status},
		{&c.Topics.Models, d.Models}, {&c.Topics.Leader, d.Leader},
	} {
		if *t.p == "" {
			*t.p = t.d
		}
	}
	return c
}

// Validate reports every problem of c at once, each matching ErrConfig: the Kafka
// connection (when brokers are given), the limits, and a negative AnswerTimeout. The
// HTTP credential files are read, and checked, by New.
func (c Config) Validate() error {
	var errs []error
	if len(c.Kafka.Brokers) > 0 {
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: kafka: %w", ErrConfig, err))
		}
	}
	lim := c.Limits
	lim.InputDim = max(lim.InputDim, 1)
	if err := lim.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: limits: %w", ErrConfig, err))
	}
	if c.Limits.InputDim < 0 {
		errs = append(errs, fmt.Errorf("%w: limits: input dimension %d is negative", ErrConfig, c.Limits.InputDim))
	}
	if c.AnswerTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: answer timeout %v is negative", ErrConfig, c.AnswerTimeout))
	}
	return errors.Join(errs...)
}

// Client is a connection to one daemon: a Kafka writer (when brokers are configured)
// and an HTTP client. Create it with New; it is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	w    *stream.Writer // nil without brokers
	ans  answers        // the reader of the answer topics, started by the first wait

	// mu is held for reading by every write and for writing by Close, so that the
	// writer is closed only once no write is in flight (kafka-go's Writer.Close can
	// hang on a partition writer started by a concurrent write).
	mu     sync.RWMutex
	closed bool
}

// New validates cfg, reads the HTTP credential files and prepares the Kafka writer. It
// opens no connection: the first request does.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc, err := admin.NewClient(cfg.HTTP.options())
	if err != nil {
		return nil, fmt.Errorf("client: HTTP credentials: %w", err)
	}
	c := &Client{cfg: cfg.withDefaults(), http: hc}
	if len(cfg.Kafka.Brokers) > 0 {
		if c.w, err = stream.NewWriter(stream.WriterConfig{Kafka: cfg.Kafka}); err != nil {
			return nil, fmt.Errorf("client: kafka writer: %w", err)
		}
	}
	return c, nil
}

// Topics returns the topic names the client uses (defaults filled in).
func (c *Client) Topics() config.Topics { return c.cfg.Topics }

// Close stops the reader of the answer topics (requests still waiting return
// ErrClosed) and waits for it, waits for the writes in flight, and closes the Kafka
// writer after flushing what it holds. It is idempotent; requests after it return
// ErrClosed.
func (c *Client) Close() error {
	c.ans.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.w == nil {
		c.closed = true
		return nil
	}
	c.closed = true
	if err := c.w.Close(); err != nil {
		return fmt.Errorf("client: closing the kafka writer: %w", err)
	}
	return nil
}

// write writes msgs (acknowledged by all in-sync replicas), or returns ErrNoBrokers or
// ErrClosed.
func (c *Client) write(ctx context.Context, msgs ...stream.Message) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.w == nil:
		return ErrNoBrokers
	case c.closed:
		return ErrClosed
	}
	return c.w.Write(ctx, msgs...)
}

// NewRequestID returns prefix-<16 hex digits> from crypto/rand. Request ids need only
// be unique: they are no model draw, so they are neither seeded nor reproducible.
func NewRequestID(prefix string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("client: request id: %w", err)
	}
	return prefix + "-" + hex.EncodeToString(b[:]), nil
}
