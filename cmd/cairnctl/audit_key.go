package main

import (
	"context"
	"encoding/hex"
	"flag"

	cairn "github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/cli"
)

// auditKeyCmd is `cairnctl audit key [--http ADDR] [--token-file FILE] [--ca-file FILE]`:
// the public half of the running daemon's audit signing key (GET /audit/key,
// client.Client.AuditKeys): public_key (Ed25519, hex) and key_id. Save it to pin it:
// `cairnctl audit verify --key FILE` then trusts only it.
func auditKeyCmd(fs *flag.FlagSet) cli.Func {
	return daemonGetCmd(fs, func(ctx context.Context, c *cairn.Client) (any, error) {
		keys, err := c.AuditKeys(ctx)
		for _, k := range keys {
			return daemon.AuditKey{PublicKey: hex.EncodeToString(k), KeyID: auditsig.KeyID(k)}, nil
		}
		return nil, err
	})
}
