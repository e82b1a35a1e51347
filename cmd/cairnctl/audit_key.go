package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/internal/auditsig"
	"github.com/cairnhq/cairn/internal/cli"
)

// auditKeyCmd is `cairnctl audit key [--http ADDR] [--token-file FILE] [--ca-file FILE]`:
// the public half of the running
// daemon's audit signing key (GET /audit/key): public_key (Ed25519, hex) and key_id.
// Save it to pin it: `cairnctl audit verify --key FILE` then trusts only it.
func auditKeyCmd(fs *flag.FlagSet) cli.Func {
	return daemonGetCmd(fs, func(ctx context.Context, d daemonHTTP) (any, error) {
		keys, err := fetchAuditKeys(ctx, d)
		for _, k := range keys {
			return daemon.AuditKey{PublicKey: hex.EncodeToString(k), KeyID: auditsig.KeyID(k)}, nil
		}
		return nil, err
	})
}

// auditKeys are the public keys a verifier trusts, by key id.
type auditKeys map[string]ed25519.PublicKey

// fetchAuditKeys reads GET /audit/key of the daemon d.
func fetchAuditKeys(ctx context.Context, d daemonHTTP) (auditKeys, error) {
	body, err := d.json(ctx, "/audit/key")
	if err != nil {
		return nil, err
	}
	return parseAuditKeys(body)
}

// readAuditKeyFile reads a pinned key file: the JSON of `cairnctl audit key` or GET
// /audit/key (one object, or several on separate lines, for keys rotated out), or bare
// hex public keys, one per line.
func readAuditKeyFile(path string) (auditKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	keys, err := parseAuditKeys(b)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	return keys, nil
}

func parseAuditKeys(b []byte) (auditKeys, error) {
	keys := auditKeys{}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if trimmed := strings.TrimSpace(string(b)); strings.HasPrefix(trimmed, "{") {
		for dec.More() {
			var k daemon.AuditKey
			if err := dec.Decode(&k); err != nil {
				return nil, fmt.Errorf("not audit key JSON: %v", err)
			}
			if err := keys.add(k.PublicKey); err != nil {
				return nil, err
			}
		}
	} else {
		for _, line := range strings.Fields(trimmed) {
			if err := keys.add(line); err != nil {
				return nil, err
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no public key")
	}
	return keys, nil
}

func (k auditKeys) add(h string) error {
	pub, err := hex.DecodeString(h)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("public key %.80q: want %d bytes in hex", h, ed25519.PublicKeySize)
	}
	k[auditsig.KeyID(pub)] = pub
	return nil
}
