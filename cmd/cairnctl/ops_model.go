package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/cli"
)

// maxModelBytes bounds the GET /model body read: M·D numbers as JSON text, about 9 MB
// at the defaults (M = 512, D = 784), so a model of 50 times that still fits.
const maxModelBytes = 512 << 20

// modelExportCmd is `cairnctl model export [--data-dir DIR] [--model V] [--config FILE]
// [--http ADDR] [--timeout 30s]`: it prints one model version as daemon.ModelExport
// (keys model, model_id, arch, weights, weights_sha256, kernel_scale, score, landmarks
// [{id, view, x, omega}]), enough to recompute every score of an answer. With
// --data-dir it reads the bbolt file DIR/cairn.db of a stopped daemon
// (daemon.ExportStored, under the daemon's configuration: --config and the CAIRN_*
// environment, as cairnd reads them; refused when the configuration's model, weights,
// sketch or seed differ from the ones the file was written with); without it, it asks
// the running daemon's GET /model at --http. --model picks a stored version (default:
// the newest, or the serving one). Landmarks of deleted points are never listed.
// --brokers is accepted like every operator command's but not used: the model is read
// from the daemon's file or its HTTP endpoint, not from Kafka.
func modelExportCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesHTTP|usesConfig)
	dataDir := fs.String("data-dir", "", "read the bbolt file DIR/cairn.db of a stopped daemon instead of asking a running one over HTTP")
	version := fs.Uint64("model", 0, "model version to export (0: the newest stored, or the serving one over HTTP)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the HTTP request")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *dataDir != "" {
			cfg, err := config.Load(kf.config, os.Environ())
			if err != nil {
				return err
			}
			e, err := exportDataDir(cfg, *dataDir, *version)
			if err != nil {
				return err
			}
			return writeJSON(stdio.Out, e)
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		body, err := fetchModelExport(ctx, kf.http, *version)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, json.RawMessage(body))
	}
}

// exportDataDir exports model version (0: the newest) from the stopped daemon's file
// in dir, written under cfg.
func exportDataDir(cfg config.Config, dir string, version uint64) (daemon.ModelExport, error) {
	st, err := openStopped(filepath.Join(dir, daemon.StateFile), "export through its HTTP endpoint without --data-dir")
	if err != nil {
		return daemon.ModelExport{}, err
	}
	defer st.Close()
	e, err := daemon.ExportStored(cfg, st, version)
	if err != nil {
		return e, fmt.Errorf("%s: %w", dir, err)
	}
	return e, nil
}

// fetchModelExport returns the JSON body of GET /model[?model=V] at addr.
func fetchModelExport(ctx context.Context, addr string, version uint64) ([]byte, error) {
	url := strings.TrimSuffix(statusURL(addr), "/status") + "/model"
	if version > 0 {
		url += "?model=" + strconv.FormatUint(version, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon not reachable at %s: %w (is cairnd running with --http %s? for a stopped daemon pass --data-dir)", url, err, addr)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if len(body) > maxModelBytes {
		return nil, fmt.Errorf("%s: body larger than %d bytes", url, maxModelBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s: %.300q", url, resp.Status, body)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s: answer is not JSON (is %s a cairn daemon?): %.300q", url, addr, body)
	}
	return body, nil
}
