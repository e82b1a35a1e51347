package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/cairnhq/cairn/daemon"
)

const (
	// maxStatusBytes bounds the body of /status and /audit/key, so a wrong address
	// serving something huge cannot exhaust memory.
	maxStatusBytes = 16 << 20
	// maxModelBytes bounds the body of /model: M·D numbers as JSON text, about 9 MB at
	// the defaults (M = 512, D = 784), so a model of 50 times that still fits.
	maxModelBytes = 512 << 20
)

// Status is the daemon's GET /status: decoded, and its bytes as received.
type Status struct {
	daemon.StatusReport
	Raw json.RawMessage
}

// Model is a model version as GET /model exports it (daemon.ModelExport: enough to
// recompute every score of an answer): decoded, and its bytes as received.
type Model struct {
	daemon.ModelExport
	Raw json.RawMessage
}

// Status reads the daemon's GET /status. A body that does not decode is returned in
// Raw, with an error matching ErrSchema.
func (c *Client) Status(ctx context.Context) (Status, error) {
	body, err := c.get(ctx, "/status", maxStatusBytes)
	if err != nil {
		return Status{}, err
	}
	s := Status{Raw: body}
	if err := json.Unmarshal(body, &s.StatusReport); err != nil {
		return s, fmt.Errorf("%s/status: %w: %w", c.cfg.HTTP.base(), ErrSchema, err)
	}
	return s, nil
}

// Model reads model version from the daemon's GET /model (version 0: the serving one).
// Landmarks of deleted points are never listed. A body that does not decode is
// returned in Raw, with an error matching ErrSchema.
func (c *Client) Model(ctx context.Context, version uint64) (Model, error) {
	path := "/model"
	if version > 0 {
		path += "?model=" + strconv.FormatUint(version, 10)
	}
	body, err := c.get(ctx, path, maxModelBytes)
	if err != nil {
		return Model{}, err
	}
	m := Model{Raw: body}
	if err := json.Unmarshal(body, &m.ModelExport); err != nil {
		return m, fmt.Errorf("%s%s: %w: %w", c.cfg.HTTP.base(), path, ErrSchema, err)
	}
	return m, nil
}

// AuditKeys reads the public half of the daemon's audit signing key (GET /audit/key),
// to pin it (trust on first use) for VerifyAudits.
func (c *Client) AuditKeys(ctx context.Context) (Keys, error) {
	body, err := c.get(ctx, "/audit/key", maxStatusBytes)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(body)
	if err != nil {
		return nil, fmt.Errorf("%s/audit/key: %w", c.cfg.HTTP.base(), err)
	}
	return k, nil
}

// get returns the JSON body of GET path, of at most limit bytes.
func (c *Client) get(ctx context.Context, path string, limit int) ([]byte, error) {
	url := c.cfg.HTTP.base() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("client: daemon address %q: %w", c.cfg.HTTP.Addr, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, url, err)
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
		return nil, fmt.Errorf("%s: HTTP %s: %w (%.300q)", url, resp.Status, ErrUnauthorized, body)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s: %.300q", url, resp.Status, body)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: %w (is %s a cairn daemon?): %.300q", url, ErrNotJSON, c.cfg.HTTP.Addr, body)
	}
	return body, nil
}
