package main

// The Kafka-facing commands (produce, query, delete, status, audit verify, demo,
// bench) talk to a running daemon through the topics of DESIGN.md section 3 and its
// HTTP /status, with the flag names and JSON keys of the operator contract.
// This file holds what they share: connection flags, the configuration they read
// topic names and limits from, request ids, and tail, which reads output topics from
// offsets captured before a request was sent.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/entk"
	"github.com/cairnhq/cairn/internal/admin"
	"github.com/cairnhq/cairn/stream"
)

// opsUses says which of the shared connection flags an operator command acts on.
type opsUses uint8

const (
	usesBrokers opsUses = 1 << iota // --brokers: the command talks to Kafka
	usesHTTP                        // --http: the command talks to the daemon's HTTP endpoints
	usesConfig                      // --config: the command reads the daemon's configuration
)

// connFlags are the connection flags every operator command takes: --brokers, --http
// and --config, and for a guarded HTTP surface --token-file, --ca-file, --client-cert
// and --client-key, with the same names and defaults everywhere, so one script can pass
// the same connection flags to every command. A command that does not use one of them
// still accepts it and says so in its help.
type connFlags struct {
	brokers string
	http    string
	config  string
	// The daemon's guarded HTTP surface (admin.ClientOptions).
	tokenFile, caFile, clientCert, clientKey string
}

// unusedNote ends the help of a connection flag the command accepts but does not use.
const unusedNote = " (accepted for script uniformity; not used by this command)"

func (k *connFlags) register(fs *flag.FlagSet, uses opsUses) {
	d := config.Default()
	note := func(u opsUses) string {
		if uses&u == 0 {
			return unusedNote
		}
		return ""
	}
	fs.StringVar(&k.brokers, "brokers", d.Kafka.EmbeddedBroker,
		"comma-separated Kafka bootstrap servers (the daemon's embedded broker by default)"+note(usesBrokers))
	fs.StringVar(&k.http, "http", d.HTTP,
		"the daemon's HTTP address (host:port, or a URL)"+note(usesHTTP))
	fs.StringVar(&k.config, "config", "",
		"cairnd YAML configuration to take topic names, limits, TLS and SASL from (optional)"+note(usesConfig))
	fs.StringVar(&k.tokenFile, "token-file", "",
		"file holding the daemon's HTTP bearer token (http_auth.token_file; mode 0600 or stricter); sent only over https or to loopback"+note(usesHTTP))
	fs.StringVar(&k.caFile, "ca-file", "",
		"PEM CAs to trust for the daemon's HTTPS certificate instead of the system roots; a bare --http host:port then means https"+note(usesHTTP))
	fs.StringVar(&k.clientCert, "client-cert", "",
		"PEM client certificate for a daemon that authenticates by mutual TLS (with --client-key)"+note(usesHTTP))
	fs.StringVar(&k.clientKey, "client-key", "",
		"PEM private key of --client-cert"+note(usesHTTP))
}

// daemon is the running daemon's HTTP surface at --http, reached through
// admin.NewClient with --token-file, --ca-file, --client-cert and --client-key (the
// one HTTP client of every command that talks to the daemon).
func (k *connFlags) daemon() (daemonHTTP, error) {
	o := admin.ClientOptions{TokenFile: k.tokenFile, CAFile: k.caFile, CertFile: k.clientCert, KeyFile: k.clientKey}
	c, err := admin.NewClient(o)
	if err != nil {
		return daemonHTTP{}, fmt.Errorf("--token-file, --ca-file, --client-cert, --client-key: %w", err)
	}
	return daemonHTTP{addr: k.http, base: daemonBase(k.http, o.TLS()), client: c}, nil
}

// load returns the configuration (config.Load of --config and the CAIRN_* environment,
// as cairnd reads it) and the Kafka connection: --brokers when given explicitly, else
// the configuration's external brokers, else its embedded broker address.
func (k *connFlags) load(fs *flag.FlagSet) (config.Config, stream.Config, error) {
	cfg, err := config.Load(k.config, os.Environ())
	if err != nil {
		return cfg, stream.Config{}, err
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "brokers" })
	brokers := cfg.Kafka.Brokers
	if explicit || len(brokers) == 0 {
		brokers = nil
		src := k.brokers
		if !explicit {
			src = cfg.Kafka.EmbeddedBroker
		}
		for _, b := range strings.Split(src, ",") {
			if b = strings.TrimSpace(b); b != "" {
				brokers = append(brokers, b)
			}
		}
	}
	if len(brokers) == 0 {
		return cfg, stream.Config{}, fmt.Errorf("--brokers %q: no broker address", k.brokers)
	}
	kc := kafkaConfig(cfg, brokers)
	if err := kc.Validate(); err != nil {
		return cfg, kc, err
	}
	return cfg, kc, nil
}

// kafkaConfig is the daemon's Kafka connection under cfg (TLS and SASL included) to
// brokers.
func kafkaConfig(cfg config.Config, brokers []string) stream.Config {
	kc := daemon.KafkaConfig(cfg)
	kc.Brokers = brokers
	kc.ClientID = "cairnctl"
	return kc
}

// inputLimits are the limits the daemon applies to input events under cfg, with
// InputDim set by the caller (the data's width; a delete carries no vector).
func inputLimits(cfg config.Config, inputDim int) stream.Limits {
	return stream.Limits{
		InputDim:   max(inputDim, 1),
		MaxBytes:   cfg.Limits.MaxMessageBytes,
		MaxIDBytes: cfg.Limits.MaxIDBytes,
		MaxK:       cfg.Limits.MaxK,
	}
}

// warnInputDim tells the operator when vectors of width d cannot be accepted by a
// daemon running cfg's model: the daemon would dead-letter them. It only warns, since
// the daemon may run another configuration than the one cairnctl was given.
func warnInputDim(stderr io.Writer, cfg config.Config, d int) {
	a, err := entk.ParseArch(cfg.Model.Arch)
	if err != nil || a.In == d {
		return
	}
	fmt.Fprintf(stderr, "cairnctl: warning: vectors have %d values but the configured model %s takes %d; "+
		"a daemon running it dead-letters them (pass the daemon's --config if it runs another model)\n",
		d, cfg.Model.Arch, a.In)
}

// newRequestID returns prefix-<16 hex digits> from crypto/rand. Request ids only need
// to be unique, and this is no model draw, so it need not be seeded or reproducible.
func newRequestID(prefix string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("request id: %w", err)
	}
	return prefix + "-" + hex.EncodeToString(b[:]), nil
}

// tail delivers every message written to its topics after it was opened: newTail
// captures the end offsets first, and a reader started from them runs until Close.
// Open the tail before producing the request whose answer it should see.
type tail struct {
	msgs   chan stream.Message
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	runErr error
}

// newTail captures the end offsets of topics and starts reading from there.
func newTail(ctx context.Context, kc stream.Config, stderr io.Writer, topics ...string) (*tail, error) {
	from := map[string]map[int]int64{}
	for _, t := range topics {
		ends, err := stream.EndOffsets(ctx, kc, t)
		if err != nil {
			return nil, fmt.Errorf("reading the end of topic %q (is the broker at %s up?): %w", t, strings.Join(kc.Brokers, ","), err)
		}
		from[t] = ends
	}
	r, err := stream.NewReader(stream.ReaderConfig{
		Kafka:  kc,
		Topics: topics,
		Start:  stream.StartAt(from),
		// Answers are small and wanted at once: do not let a fetch idle long
		// when the broker holds no data yet (kafka-go returns as soon as
		// MinBytes arrive, so this only bounds shutdown).
		MaxWait: 100 * time.Millisecond,
		OnError: func(topic string, partition int, err error) {
			fmt.Fprintf(stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
		},
	})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	t := &tail{msgs: make(chan stream.Message, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		err := r.Run(rctx, func(ctx context.Context, batch []stream.Message) error {
			for _, m := range batch {
				select {
				case t.msgs <- m:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		t.mu.Lock()
		t.runErr = err
		t.mu.Unlock()
	}()
	return t, nil
}

// next returns the next message, or an error when ctx ends or the reader failed.
func (t *tail) next(ctx context.Context) (stream.Message, error) {
	select {
	case m := <-t.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-t.msgs:
		return m, nil
	case <-t.done:
		// Messages delivered before the reader stopped come first.
		select {
		case m := <-t.msgs:
			return m, nil
		default:
		}
		t.mu.Lock()
		err := t.runErr
		t.mu.Unlock()
		if err == nil {
			err = errors.New("reader stopped")
		}
		return stream.Message{}, fmt.Errorf("reading output topics: %w", err)
	case <-ctx.Done():
		return stream.Message{}, ctx.Err()
	}
}

// Close stops the reader and waits for it; it is idempotent and returns the reader's
// error, if it failed before Close.
func (t *tail) Close() error {
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runErr
}

// openWriter returns a writer for kc with the ordinary retry settings.
func openWriter(kc stream.Config) (*stream.Writer, error) {
	return stream.NewWriter(stream.WriterConfig{Kafka: kc})
}
