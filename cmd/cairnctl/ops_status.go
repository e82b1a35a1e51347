package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/cli"
)

// maxStatusBytes bounds the /status body read, so a wrong address serving something
// huge cannot exhaust memory.
const maxStatusBytes = 16 << 20

// statusCmd is `cairnctl status [--http ADDR] [--timeout 5s] [--token-file FILE]
// [--ca-file FILE] [--client-cert FILE --client-key FILE]`: GET ADDR/status of a
// running daemon and print its JSON as received. --brokers and --config are accepted
// like every operator command's but not used.
func statusCmd(fs *flag.FlagSet) cli.Func {
	return daemonGetCmd(fs, func(ctx context.Context, d daemonHTTP) (any, error) {
		body, err := d.json(ctx, "/status")
		return json.RawMessage(body), err
	})
}

// daemonGetCmd is a command that prints what get reads from the running daemon at
// --http, within --timeout.
func daemonGetCmd(fs *flag.FlagSet, get func(ctx context.Context, d daemonHTTP) (any, error)) cli.Func {
	var kf connFlags
	kf.register(fs, usesHTTP)
	timeout := fs.Duration("timeout", 5*time.Second, "bound on the request")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		d, err := kf.daemon()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		v, err := get(ctx, d)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, v)
	}
}

// daemonBase turns --http into the base URL of the daemon: a bare host:port gets
// http://, or https:// when tls (a CA or a client certificate was given).
func daemonBase(addr string, tls bool) string {
	addr = strings.TrimSuffix(addr, "/")
	if !strings.HasPrefix(addr, "http://") && !strings.HasPrefix(addr, "https://") {
		if tls {
			return "https://" + addr
		}
		return "http://" + addr
	}
	return addr
}

// statusURL turns --http into the /status URL: a bare host:port gets http://.
func statusURL(addr string) string { return daemonBase(addr, false) + "/status" }

// daemonHTTP is the running daemon's HTTP surface: its --http as given (for messages),
// its base URL and the client that authenticates there (connFlags.daemon).
type daemonHTTP struct {
	addr, base string
	client     *http.Client
}

// json returns the JSON body of GET path (at most maxStatusBytes).
func (d daemonHTTP) json(ctx context.Context, path string) ([]byte, error) {
	return d.get(ctx, path, maxStatusBytes, "")
}

// get returns the JSON body of GET path, of at most limit bytes; hint ends the message
// of a daemon that does not answer.
func (d daemonHTTP) get(ctx context.Context, path string, limit int, hint string) ([]byte, error) {
	url := d.base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", d.addr, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon not reachable at %s: %w (is cairnd running with --http %s?%s)", url, err, d.addr, hint)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if len(body) > limit {
		return nil, fmt.Errorf("%s: body larger than %d bytes", url, limit)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("%s: HTTP %s: the daemon's HTTP surface needs authentication: --token-file FILE, or --client-cert and --client-key (%.300q)", url, resp.Status, body)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s: %.300q", url, resp.Status, body)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: answer is not JSON (is %s a cairn daemon?): %.300q", url, d.addr, body)
	}
	return body, nil
}
