package main

import (
	"context"
	"errors"
	"flag"
	"path/filepath"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/ingest"
)

// subjectHashReport is the output of `cairnctl subject hash`.
type subjectHashReport struct {
	SubjectHash string `json:"subject_hash"`
	KeyFile     string `json:"key_file"`
}

// subjectHashCmd is `cairnctl subject hash --subject S [--data-dir DIR | --key-file
// FILE]`: it prints {"subject_hash":…,"key_file":…}, the keyed hash (hex HMAC-SHA256
// under the deployment's subject key, ingest.SubjectKey.Hash) by which cairn names the
// subject everywhere (audits, dead letters, /status, logs), so an operator can find a
// subject's erasure among the audits. The key is DIR/subject.key (the daemon's data
// directory, data_dir of the configuration by default) or FILE; it is read, never
// created. --subject - reads the subject from stdin.
func subjectHashCmd(fs *flag.FlagSet) cli.Func {
	subject := fs.String("subject", "", "the data subject (required; - reads it from stdin)")
	dataDir := fs.String("data-dir", config.Default().DataDir, "the daemon's data directory, which holds "+ingest.SubjectKeyFile)
	keyFile := fs.String("key-file", "", "the subject key file itself (instead of --data-dir)")
	return func(_ context.Context, stdio cli.Stdio) error {
		s, err := subjectArg(*subject, stdio)
		if err != nil {
			return err
		}
		path := *keyFile
		if path == "" {
			if *dataDir == "" {
				return errors.New("--data-dir or --key-file: required")
			}
			path = filepath.Join(*dataDir, ingest.SubjectKeyFile)
		}
		k, err := ingest.ReadSubjectKey(path)
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, subjectHashReport{SubjectHash: ingest.SubjectHex(k.Hash(s)), KeyFile: path})
	}
}
