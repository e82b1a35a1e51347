package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
		d, err := kf.daemon()
		if err != nil {
			return err
		}
		body, err := d.model(ctx, *version)
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

// model returns the JSON body of GET /model[?model=V] (version 0: the serving one).
func (d daemonHTTP) model(ctx context.Context, version uint64) ([]byte, error) {
	path := "/model"
	if version > 0 {
		path += "?model=" + strconv.FormatUint(version, 10)
	}
	return d.get(ctx, path, maxModelBytes, " for a stopped daemon pass --data-dir")
}

// fetchModelExport returns the JSON body of GET /model[?model=V] at addr over plain
// HTTP without credentials (bench's own daemon, on loopback).
func fetchModelExport(ctx context.Context, addr string, version uint64) ([]byte, error) {
	return daemonHTTP{addr: addr, base: daemonBase(addr, false), client: http.DefaultClient}.model(ctx, version)
}
