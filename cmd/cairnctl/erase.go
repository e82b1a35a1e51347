package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/stream"
)

// eraseCmd is `cairnctl erase --subject S [--request R] [--unblock] [--wait] [--timeout
// 300s]`: it sends {"v":1,"op":"erase","subject":…,"request":…} (or "unblock") to
// cairn.erasures keyed by the subject (client.Client.SendErasure, or Erase with
// --wait). The daemon erases every point whose latest upsert named the subject, then
// refuses the subject's later upserts until an unblock request. Without --wait it
// prints {"request":…,"topic":…,"sent":true}; with --wait it prints the audit exactly
// as the daemon wrote it: for an erasure the one signed audit listing every erased
// point with its tombstone (after the refit without them), for an unblock its audit.
// Nothing it prints names the subject (the audit names its keyed hash: `cairnctl
// subject hash` recomputes it); --subject - reads the subject from stdin, which keeps
// it out of the shell's history.
func eraseCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesConfig)
	subject := fs.String("subject", "", "the data subject, as the upserts name it in \"subject\" (required; - reads it from stdin)")
	request := fs.String("request", "", "request id the audit answers (default: e-<16 random hex digits>)")
	unblock := fs.Bool("unblock", false, "lift an erasure's block of the subject's later upserts instead of erasing")
	wait := fs.Bool("wait", false, "wait for the request's audit and print it")
	timeout := fs.Duration("timeout", 300*time.Second, "with --wait: how long to wait for the audit")
	return func(ctx context.Context, stdio cli.Stdio) error {
		s, err := subjectArg(*subject, stdio)
		if err != nil {
			return err
		}
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		_, c, err := kf.load(fs, stdio.Err, *timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		ev := stream.ErasureEvent{Op: stream.ErasureErase, Subject: s, Request: *request}
		if *unblock {
			ev.Op = stream.ErasureUnblock
		}
		if ev.Request == "" {
			if ev.Request, err = cairn.NewRequestID("e"); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout+15*time.Second)
		defer cancel()
		if !*wait {
			sent, err := c.SendErasure(ctx, ev)
			if err != nil {
				return err
			}
			return writeJSON(stdio.Out, sentReport{Request: sent.Request, Topic: sent.Topic, Sent: true})
		}
		fmt.Fprintf(stdio.Err, "cairnctl: %s request %s; waiting up to %v for its audit\n", ev.Op, ev.Request, *timeout)
		a, err := c.Erase(ctx, ev)
		return printAnswer(stdio.Out, ev.Request, a.Raw, err)
	}
}

// subjectArg is the subject of --subject: the value, or with "-" the first line of
// stdin (without its line end).
func subjectArg(v string, stdio cli.Stdio) (string, error) {
	if v == "" {
		return "", errors.New("--subject: required")
	}
	if v != "-" {
		return v, nil
	}
	if stdio.In == nil {
		return "", errors.New("--subject -: no stdin")
	}
	line, err := bufio.NewReader(io.LimitReader(stdio.In, 4097)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("--subject -: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" || len(line) > 4096 {
		return "", fmt.Errorf("--subject -: stdin holds %d bytes before its first line end; want one subject", len(line))
	}
	return line, nil
}
