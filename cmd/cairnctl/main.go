// Command cairnctl is cairn's operator CLI: the offline tools (verify, entk, select, fit,
// explain, audit, reproduce, bench) that run the same code as the daemon, and the
// Kafka-facing commands. Every command prints one JSON object on stdout (reproduce: one
// per table, or Markdown with --format markdown); diagnostics go to stderr; exit 1 means
// the command failed, 2 that it was invoked wrongly. The commands are in commands.go.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/internal/base/gcpace"
	"github.com/cairnhq/cairn/internal/base/gemm"
)

func main() {
	blas64.Use(gemm.Implementation{}) // the fits' matrix products (internal/base/gemm)
	blas32.Use(gemm.Implementation{}) // and their float32 form (fit.Options.Float32)
	gcpace.Set()                      // GOGC=25 unless set: see internal/base/gcpace
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
