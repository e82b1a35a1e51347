package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/internal/cli"
)

// statusCmd is `cairnctl status [--http ADDR] [--timeout 5s] [--token-file FILE]
// [--ca-file FILE] [--client-cert FILE --client-key FILE]`: GET ADDR/status of a
// running daemon and print its JSON as received. --brokers and --config are accepted
// like every operator command's but not used.
func statusCmd(fs *flag.FlagSet) cli.Func {
	return daemonGetCmd(fs, func(ctx context.Context, c *cairn.Client) (any, error) {
		st, err := c.Status(ctx)
		return st.Raw, err
	})
}

// daemonGetCmd is a command that prints what get reads from the running daemon at
// --http, within --timeout.
func daemonGetCmd(fs *flag.FlagSet, get func(ctx context.Context, c *cairn.Client) (any, error)) cli.Func {
	var kf connFlags
	kf.register(fs, usesHTTP)
	timeout := fs.Duration("timeout", 5*time.Second, "bound on the request")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		c, err := kf.daemon()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		v, err := get(ctx, c)
		if err != nil {
			return httpHint(err, kf.http, "")
		}
		return writeJSON(stdio.Out, v)
	}
}
