package main

// The Kafka-facing commands (produce, query, delete, status, audit verify, audit key,
// model export, demo) talk to a running daemon through package client, with the flag
// names and JSON keys of the operator contract. This file holds what they share: the
// connection flags and the client they configure, and the flag hints added to the
// client's errors.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/entk"
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
	// The daemon's guarded HTTP surface (client.HTTP).
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

// httpConfig is the daemon's HTTP surface at --http with --token-file, --ca-file,
// --client-cert and --client-key.
func (k *connFlags) httpConfig() cairn.HTTP {
	return cairn.HTTP{Addr: k.http, TokenFile: k.tokenFile, CAFile: k.caFile, CertFile: k.clientCert, KeyFile: k.clientKey}
}

// daemon is a client of the running daemon's HTTP surface only.
func (k *connFlags) daemon() (*cairn.Client, error) {
	c, err := cairn.New(cairn.Config{HTTP: k.httpConfig()})
	if err != nil {
		return nil, fmt.Errorf("--token-file, --ca-file, --client-cert, --client-key: %w", err)
	}
	return c, nil
}

// load returns the configuration (config.Load of --config and the CAIRN_* environment,
// as cairnd reads it) and the client of the daemon running it (client.FromDaemon with
// the HTTP flags): through --brokers when given explicitly, else the configuration's
// external brokers, else its embedded broker address. It waits up to wait for an answer
// once its request is sent (0: no bound but the context's), and reports read errors of
// the answer topics on stderr.
func (k *connFlags) load(fs *flag.FlagSet, stderr io.Writer, wait time.Duration) (config.Config, *cairn.Client, error) {
	cfg, err := config.Load(k.config, os.Environ())
	if err != nil {
		return cfg, nil, err
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "brokers" })
	src := cfg.Kafka.EmbeddedBroker
	if explicit || len(cfg.Kafka.Brokers) == 0 {
		if explicit {
			src = k.brokers
		}
		var brokers []string
		for _, b := range strings.Split(src, ",") {
			if b = strings.TrimSpace(b); b != "" {
				brokers = append(brokers, b)
			}
		}
		if len(brokers) == 0 {
			return cfg, nil, fmt.Errorf("--brokers %q: no broker address", k.brokers)
		}
		cfg.Kafka.Brokers = brokers
	}
	cc, err := cairn.FromDaemon(cfg, cfg.Kafka.Brokers)
	if err != nil {
		return cfg, nil, err
	}
	cc.Kafka.ClientID = "cairnctl"
	cc.HTTP = k.httpConfig()
	cc.AnswerTimeout = wait
	cc.OnReadError = func(topic string, partition int, err error) {
		fmt.Fprintf(stderr, "cairnctl: reading %s/%d: %v (retrying)\n", topic, partition, err)
	}
	c, err := cairn.New(cc)
	return cfg, c, err
}

// httpHint adds to an error of the daemon's HTTP surface at addr the flags that fix
// it; more ends the hint of a daemon that does not answer.
func httpHint(err error, addr, more string) error {
	switch {
	case errors.Is(err, cairn.ErrUnreachable):
		return fmt.Errorf("%w (is cairnd running with --http %s?%s)", err, addr, more)
	case errors.Is(err, cairn.ErrUnauthorized):
		return fmt.Errorf("%w: --token-file FILE, or --client-cert and --client-key", err)
	}
	return err
}

// dataDirHint names --data-dir in an error reading a stopped daemon's file, and says
// what to do instead while the daemon runs.
func dataDirHint(err error, instead string) error {
	if errors.Is(err, cairn.ErrLocked) {
		return fmt.Errorf("--data-dir: %w (or %s without --data-dir)", err, instead)
	}
	return fmt.Errorf("--data-dir: %w", err)
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
