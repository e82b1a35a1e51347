// Command cairnd is the cairn daemon: flags → config → daemon.Run under
// signal.NotifyContext. Logs are zerolog JSON lines on stderr at the configured
// log_level (CAIRN_LOG_LEVEL in the environment).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/base/gcpace"
	"github.com/cairnhq/cairn/internal/base/gemm"
)

func main() {
	blas64.Use(gemm.Implementation{}) // the fits' matrix products (internal/base/gemm)
	blas32.Use(gemm.Implementation{}) // and their float32 form (fit.Options.Float32)
	gcpace.Set()                      // GOGC=25 unless set: see internal/base/gcpace
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	flags := config.RegisterFlags(fs)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, fs, flags); err != nil {
		fmt.Fprintln(os.Stderr, "cairnd:", err)
		os.Exit(1)
	}
}

// usage prints the flags the way users write them: --name value.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintln(w, "usage: cairnd [--config FILE] [--role primary|replica|standby|featurizer] [--data-dir DIR] [--embedded-broker ADDR] [--http ADDR] [--brokers LIST] [--arch SPEC] [--weights FILE] [--model FILE.onnx [--params GLOB,...]]")
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s\n    \t%s%s\n", f.Name, f.Usage, def)
	})
}

func run(ctx context.Context, fs *flag.FlagSet, flags *config.Flags) error {
	cfg, err := flags.Load(fs, os.Environ())
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		return fmt.Errorf("log_level %q: %w", cfg.LogLevel, err)
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Str("service", "cairnd").Logger()
	d, err := daemon.New(cfg, log)
	if err != nil {
		return err
	}
	injectFaults(d, cfg)
	return d.Run(ctx)
}

// injectFaults installs test faults in a binary built with -tags faultinject
// (faultinject.go); it does nothing otherwise.
var injectFaults = func(*daemon.Daemon, config.Config) {}
