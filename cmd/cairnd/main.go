// Command cairnd is the cairn daemon: flags → config → daemon.Run under
// signal.NotifyContext. The daemon itself is built in the daemon issue; until then cairnd
// validates its configuration and exits with an error saying the daemon is not built yet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairnhq/cairn/config"
)

func main() {
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	flags := config.RegisterFlags(fs)
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

func run(_ context.Context, fs *flag.FlagSet, flags *config.Flags) error {
	cfg, err := flags.Load(fs, os.Environ())
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return errors.New("the daemon is not built yet (see README.md); the configuration is valid")
}
