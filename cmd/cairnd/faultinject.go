//go:build faultinject

package main

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
)

// ENOSPCFile, while it exists in the data directory of a cairnd built with -tags
// faultinject, makes every write of the state file fail with ENOSPC (the history test's
// disk-full windows). Never built into a release.
const ENOSPCFile = "ENOSPC"

func init() {
	injectFaults = func(d *daemon.Daemon, cfg config.Config) {
		flag := filepath.Join(cfg.DataDir, ENOSPCFile)
		d.SetStoreFaults(func(string) error {
			if _, err := os.Stat(flag); err == nil {
				return syscall.ENOSPC
			}
			return nil
		})
	}
}
