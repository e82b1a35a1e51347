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
	fmt.Fprintln(w, "usage: cairnd [--config FILE] [--data-dir DIR] [--embedded-broker ADDR] [--http ADDR] [--brokers LIST] [--arch SPEC] [--weights FILE]")
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s\n    \t%s%s\n", f.Name, f.Usage, def)
	})
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
