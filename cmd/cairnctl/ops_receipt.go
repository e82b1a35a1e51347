package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/ui"
)

// auditReceiptCmd is `cairnctl audit receipt --request R [--format json|html]
// [--key FILE] [--brokers LIST] [--http ADDR] [--config FILE] [--timeout 60s]`: the
// erasure receipt of request R (package receipt; client.Client.Receipt): its audit
// records on cairn.audits, checked with the whole chain as audit verify checks it
// (signatures against the keys of --key, else the running daemon's GET /audit/key), and
// what they say was erased and from where. --format json prints receipt.Receipt
// {"request","kind","subject_hash","point_id","requested","applied","completed",
// "source","erased","records","chain","verified","problems","checked_by","reverify"};
// html one self-contained page that prints on A4 (internal/ui WriteReceipt), the one
// cairnd serves at /ui/erasure/R. It fails, after printing, when the receipt does not
// verify.
func auditReceiptCmd(fs *flag.FlagSet) cli.Func {
	var kf connFlags
	kf.register(fs, usesBrokers|usesHTTP|usesConfig)
	request := fs.String("request", "", "the request id of the deletion or erasure (its audit's key)")
	format := fs.String("format", "json", "json or html")
	keyFile := fs.String("key", "", "trust only the audit public keys in FILE (`cairnctl audit key` output); default: the running daemon's GET /audit/key")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on reading the audit topic")
	return func(ctx context.Context, stdio cli.Stdio) error {
		switch {
		case *request == "":
			return errors.New("--request: required")
		case *format != "json" && *format != "html":
			return fmt.Errorf("--format %q: want json or html", *format)
		case *timeout <= 0:
			return fmt.Errorf("--timeout %v: must be positive", *timeout)
		}
		keys, err := trustedKeys(ctx, *keyFile, &kf)
		if err != nil {
			return err
		}
		cfg, c, err := kf.load(fs, stdio.Err, 0)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		r, err := c.Receipt(ctx, *request, keys, reverifyCommands(*request, strings.Join(cfg.Kafka.Brokers, ","), kf.http, *keyFile))
		if err != nil {
			return err
		}
		if *format == "html" {
			err = ui.WriteReceipt(stdio.Out, r)
		} else {
			err = writeJSON(stdio.Out, r)
		}
		if err != nil {
			return err
		}
		if !r.Verified {
			return fmt.Errorf("the receipt of %q does not verify: %s", *request, r.Problems[0])
		}
		return nil
	}
}

// reverifyCommands are the commands a receipt tells its reader to run: pin the key
// (unless one is pinned), verify the chain, and make the receipt again.
func reverifyCommands(request, brokers, http, keyFile string) []string {
	key := keyFile
	var out []string
	if key == "" {
		key = "audit-key.json"
		out = append(out, fmt.Sprintf("cairnctl audit key --http %s > %s", http, key))
	}
	return append(out,
		fmt.Sprintf("cairnctl audit verify --brokers %s --key %s", brokers, key),
		fmt.Sprintf("cairnctl audit receipt --request %s --brokers %s --key %s --format html > receipt.html", request, brokers, key))
}
