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

// statusCmd is `cairnctl status [--http ADDR] [--timeout 5s]`: GET http://ADDR/status
// of a running daemon and print its JSON as received. --brokers and --config are
// accepted like every operator command's but not used.
func statusCmd(fs *flag.FlagSet) cli.Func {
	return daemonGetCmd(fs, func(ctx context.Context, addr string) (any, error) {
		body, err := fetchStatus(ctx, addr)
		return json.RawMessage(body), err
	})
}

// daemonGetCmd is a command that prints what get reads from the running daemon at
// --http, within --timeout.
func daemonGetCmd(fs *flag.FlagSet, get func(ctx context.Context, addr string) (any, error)) cli.Func {
	var kf connFlags
	kf.register(fs, usesHTTP)
	timeout := fs.Duration("timeout", 5*time.Second, "bound on the request")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		v, err := get(ctx, kf.http)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, v)
	}
}

// statusURL turns --http into the /status URL: a bare host:port gets http://.
func statusURL(addr string) string {
	addr = strings.TrimSuffix(addr, "/")
	if !strings.HasPrefix(addr, "http://") && !strings.HasPrefix(addr, "https://") {
		addr = "http://" + addr
	}
	return addr + "/status"
}

// fetchStatus returns the JSON body of GET statusURL(addr).
func fetchStatus(ctx context.Context, addr string) ([]byte, error) {
	return fetchJSON(ctx, addr, "/status")
}

// fetchJSON returns the JSON body of GET path on the daemon at addr (--http).
func fetchJSON(ctx context.Context, addr, path string) ([]byte, error) {
	url := strings.TrimSuffix(statusURL(addr), "/status") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon not reachable at %s: %w (is cairnd running with --http %s?)", url, err, addr)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if len(body) > maxStatusBytes {
		return nil, fmt.Errorf("%s: body larger than %d bytes", url, maxStatusBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s: %.300q", url, resp.Status, body)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: answer is not JSON (is %s a cairn daemon?): %.300q", url, addr, body)
	}
	return body, nil
}
