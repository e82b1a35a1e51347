package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHTTPGuardValidate: off loopback cairnd refuses to start without authentication and
// TLS for its HTTP surface; on loopback it starts as before. Each bad case names its
// field.
func TestHTTPGuardValidate(t *testing.T) {
	guarded := func(c *Config) {
		c.HTTPTLS = HTTPTLS{CertFile: "srv.pem", KeyFile: "srv.key"}
		c.HTTPAuth.TokenFile = "token"
	}
	cases := []struct {
		name   string
		mutate func(*Config)
		paths  []string // nil = valid
	}{
		{"default loopback", func(c *Config) {}, nil},
		{"localhost", func(c *Config) { c.HTTP = "localhost:8080" }, nil},
		{"ipv6 loopback", func(c *Config) { c.HTTP = "[::1]:8080" }, nil},
		{"127.0.0.2", func(c *Config) { c.HTTP = "127.0.0.2:8080" }, nil},
		{"0.0.0.0 open", func(c *Config) { c.HTTP = "0.0.0.0:8080" }, []string{"http"}},
		{"every interface open", func(c *Config) { c.HTTP = ":8080" }, []string{"http"}},
		{"a name is not loopback", func(c *Config) { c.HTTP = "cairn.internal:8080" }, []string{"http"}},
		{"0.0.0.0 with token and TLS", func(c *Config) { c.HTTP = "0.0.0.0:8080"; guarded(c) }, nil},
		{"0.0.0.0 with token, no TLS", func(c *Config) { c.HTTP = "0.0.0.0:8080"; c.HTTPAuth.TokenFile = "token" }, []string{"http"}},
		{"0.0.0.0 with TLS, no auth", func(c *Config) {
			c.HTTP = "0.0.0.0:8080"
			c.HTTPTLS = HTTPTLS{CertFile: "srv.pem", KeyFile: "srv.key"}
		}, []string{"http"}},
		{"0.0.0.0 with mTLS only", func(c *Config) {
			c.HTTP = "0.0.0.0:8080"
			c.HTTPTLS = HTTPTLS{CertFile: "srv.pem", KeyFile: "srv.key"}
			c.HTTPAuth.ClientCAFile = "ca.pem"
		}, nil},
		{"loopback with a token and no TLS", func(c *Config) { c.HTTPAuth.TokenFile = "token" }, nil},
		{"client CA without TLS", func(c *Config) { c.HTTPAuth.ClientCAFile = "ca.pem" }, []string{"http_auth.client_ca_file"}},
		{"cert without key", func(c *Config) { c.HTTPTLS.CertFile = "srv.pem" }, []string{"http_tls"}},
		{"open /model", func(c *Config) { c.HTTPAuth.OpenPaths = []string{"/healthz", "/model"} }, []string{"http_auth.open_paths"}},
		{"nothing open", func(c *Config) { c.HTTPAuth.OpenPaths = nil }, nil},
		{"session too short", func(c *Config) { c.HTTPAuth.SessionTTL = time.Second }, []string{"http_auth.session_ttl"}},
		{"sasl plain without tls", func(c *Config) {
			c.Kafka.Brokers = []string{"k:9092"}
			c.Kafka.SASL = SASL{Mechanism: "plain", Username: "u", Password: "p"}
		}, []string{"kafka.sasl.mechanism"}},
		{"sasl scram without tls", func(c *Config) {
			c.Kafka.Brokers = []string{"k:9092"}
			c.Kafka.SASL = SASL{Mechanism: "scram-sha-512", Username: "u", Password: "p"}
		}, []string{"kafka.sasl.mechanism"}},
		{"sasl with tls", func(c *Config) {
			c.Kafka.Brokers = []string{"k:9092"}
			c.Kafka.SASL = SASL{Mechanism: "scram-sha-256", Username: "u", Password: "p"}
			c.Kafka.TLS.Enabled = true
		}, nil},
		{"sasl plaintext allowed", func(c *Config) {
			c.Kafka.Brokers = []string{"k:9092"}
			c.Kafka.SASL = SASL{Mechanism: "plain", Username: "u", Password: "p"}
			c.Kafka.AllowPlaintextSASL = true
		}, nil},
		{"topic policy warn", func(c *Config) { c.Kafka.TopicPolicy = "warn" }, nil},
		{"topic policy unknown", func(c *Config) { c.Kafka.TopicPolicy = "ignore" }, []string{"kafka.topic_policy"}},
		{"everything at once", func(c *Config) {
			c.HTTP = "0.0.0.0:8080"
			c.HTTPAuth.OpenPaths = []string{"/status"}
			c.Kafka.TopicPolicy = ""
		}, []string{"http", "http_auth.open_paths", "kafka.topic_policy"}},
	}
	for _, tc := range cases {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		if tc.paths == nil {
			if err != nil {
				t.Errorf("%s: got %v, want valid", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid, want errors naming %v", tc.name, tc.paths)
			continue
		}
		for _, path := range tc.paths {
			if !strings.Contains(err.Error(), "config: "+path+" =") {
				t.Errorf("%s: got %v, want an error naming %s", tc.name, err, path)
			}
		}
		if fe, ok := errors.AsType[*FieldError](err); !ok || fe.Reason == "" {
			t.Errorf("%s: %T is not a *FieldError with a reason", tc.name, err)
		}
	}
}

// TestHTTPGuardRefusal: the refusal to listen on 0.0.0.0 without authentication says
// both what is missing and how to set it.
func TestHTTPGuardRefusal(t *testing.T) {
	c := Default()
	c.HTTP = "0.0.0.0:8080"
	err := c.Validate()
	for _, want := range []string{"without authentication", "http_auth.token_file", "--http-token-file",
		"http_auth.client_ca_file", "without TLS", "http_tls.cert_file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// TestHTTPGuardLayers: the guard's settings come from the YAML file, CAIRN_* variables
// and flags, in that order of precedence, like every other setting.
func TestHTTPGuardLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.yaml")
	yaml := "http: 0.0.0.0:8443\nhttp_tls:\n  cert_file: /etc/cairn/srv.pem\n  key_file: /etc/cairn/srv.key\n" +
		"http_auth:\n  token_file: /etc/cairn/yaml-token\n  open_paths: [/healthz]\n  session_ttl: 1h\n" +
		"kafka:\n  allow_plaintext_sasl: true\n  topic_policy: warn\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	f := RegisterFlags(fs)
	if err := fs.Parse([]string{"--config", path, "--http-token-file", "/run/flag-token", "--http-client-ca-file", "/etc/cairn/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Load(fs, []string{"CAIRN_HTTP_AUTH_TOKEN_FILE=/run/env-token", "CAIRN_HTTP_TLS_KEY_FILE=/run/env.key",
		"CAIRN_HTTP_AUTH_SESSION_TTL=30m"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"cert from file", c.HTTPTLS.CertFile, "/etc/cairn/srv.pem"},
		{"key env over file", c.HTTPTLS.KeyFile, "/run/env.key"},
		{"token flag over env over file", c.HTTPAuth.TokenFile, "/run/flag-token"},
		{"client CA from flag", c.HTTPAuth.ClientCAFile, "/etc/cairn/ca.pem"},
		{"open paths from file", strings.Join(c.HTTPAuth.OpenPaths, ","), "/healthz"},
		{"session ttl env over file", c.HTTPAuth.SessionTTL, 30 * time.Minute},
		{"allow_plaintext_sasl from file", c.Kafka.AllowPlaintextSASL, true},
		{"topic_policy from file", c.Kafka.TopicPolicy, "warn"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("layered guard invalid: %v", err)
	}
	// An empty CAIRN_HTTP_AUTH_OPEN_PATHS closes every path.
	c, err = Load("", []string{"CAIRN_HTTP_AUTH_OPEN_PATHS="})
	if err != nil || len(c.HTTPAuth.OpenPaths) != 0 {
		t.Errorf("CAIRN_HTTP_AUTH_OPEN_PATHS= gives %v, %v; want no open path", c.HTTPAuth.OpenPaths, err)
	}
	if d := Default(); !slices.Equal(d.HTTPAuth.OpenPaths, OpenablePaths) || d.Kafka.TopicPolicy != "enforce" || d.Kafka.AllowPlaintextSASL {
		t.Errorf("defaults: open paths %v, topic policy %q, allow_plaintext_sasl %v; want all three open, enforce, false",
			d.HTTPAuth.OpenPaths, d.Kafka.TopicPolicy, d.Kafka.AllowPlaintextSASL)
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:1": true, "[::1]:80": true, "localhost:80": true, "LOCALHOST:80": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if got := LoopbackAddr(addr); got != want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
