package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
)

// modelExportCmd is `cairnctl model export [--data-dir DIR] [--model V] [--config FILE]
// [--http ADDR] [--timeout 30s]`: it prints one model version as daemon.ModelExport
// (keys model, model_id, arch, weights, weights_sha256, kernel_scale, score, landmarks
// [{id, view, x, omega}]), enough to recompute every score of an answer. With
// --data-dir it reads the bbolt file DIR/cairn.db of a stopped daemon
// (client.ExportStored, under the daemon's configuration: --config and the CAIRN_*
// environment, as cairnd reads them; refused when the configuration's model, weights,
// sketch or seed differ from the ones the file was written with); without it, it asks
// the running daemon's GET /model at --http (client.Client.Model). --model picks a
// stored version (default: the newest, or the serving one). Landmarks of deleted points
// are never listed. --brokers is accepted like every operator command's but not used:
// the model is read from the daemon's file or its HTTP endpoint, not from Kafka.
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
			e, err := cairn.ExportStored(cfg, *dataDir, *version)
			if err != nil {
				return dataDirHint(err, "export through its HTTP endpoint")
			}
			return writeJSON(stdio.Out, e)
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		c, err := kf.daemon()
		if err != nil {
			return err
		}
		m, err := c.Model(ctx, *version)
		if err != nil {
			return httpHint(err, kf.http, " for a stopped daemon pass --data-dir")
		}
		return writeJSON(stdio.Out, m.Raw)
	}
}
