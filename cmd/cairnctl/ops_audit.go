package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/internal/cli"
)

// auditVerifyCmd is `cairnctl audit verify [--brokers LIST] [--config FILE]
// [--data-dir DIR] [--key FILE] [--timeout 60s]`: it walks the deletion audits' hash
// chain, from every partition of cairn.audits (client.Client.VerifyAudits: read from
// the start to the end offsets taken when the command starts, signatures checked
// against the keys of --key, else the running daemon's GET /audit/key), or with
// --data-dir from the daemon's bbolt file DIR/cairn.db (client.VerifyStore; the daemon
// must be stopped, since it holds the file lock). It prints client.ChainReport
// {"ok","records","head","first_bad_seq","reason","source","duplicates","forged",
// "signatures","from_checkpoint"} and fails when the chain does not verify.
func auditVerifyCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesHTTP|usesConfig)
	dataDir := fs.String("data-dir", "", "verify the daemon's bbolt file DIR/cairn.db instead of the Kafka topic (daemon stopped)")
	keyFile := fs.String("key", "", "trust only the audit public keys in FILE (`cairnctl audit key` output, or hex keys one per line); default: the running daemon's GET /audit/key")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on reading the audit topic")
	return func(ctx context.Context, stdio cli.Stdio) error {
		if *timeout <= 0 {
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		var rep cairn.ChainReport
		if *dataDir != "" {
			var err error
			if rep, err = cairn.VerifyStore(*dataDir); err != nil {
				return dataDirHint(err, "verify through Kafka")
			}
		} else {
			keys, err := trustedKeys(ctx, *keyFile, &kf)
			if err != nil {
				return err
			}
			_, c, err := kf.load(fs, stdio.Err, 0)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(ctx, *timeout)
			defer cancel()
			if rep, err = c.VerifyAudits(ctx, keys); err != nil {
				return err
			}
			if keys == nil {
				rep.Signatures += " (pass --key FILE, or --http of the running daemon)"
			}
		}
		if err := writeJSON(stdio.Out, rep); err != nil {
			return err
		}
		if !rep.OK {
			return fmt.Errorf("audit chain does not verify: %s", rep.Reason)
		}
		return nil
	}
}

// trustedKeys are the pinned keys of --key, or else the running daemon's (GET
// /audit/key at --http, trusted on first use, with kf's credentials); nil when neither
// is available, and then signatures are not checked (the report says so). Credentials
// that do not load (--token-file, --ca-file, ...) are an error, not "unavailable".
func trustedKeys(ctx context.Context, keyFile string, kf *connFlags) (cairn.Keys, error) {
	if keyFile != "" {
		keys, err := cairn.ReadKeys(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		return keys, nil
	}
	c, err := kf.daemon()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	keys, err := c.AuditKeys(ctx)
	if err != nil {
		return nil, nil
	}
	return keys, nil
}
