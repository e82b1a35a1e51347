package client

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/daemon"
	"github.com/cairnhq/cairn/storage"
)

// lockWait is how long a stopped daemon's file is waited for.
const lockWait = 2 * time.Second

// openStopped opens the state file in dataDir. storage has no read-only open: Open
// takes the file lock and writes only to migrate an older format.
func openStopped(dataDir string) (*storage.Store, error) {
	path := filepath.Join(dataDir, daemon.StateFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w (want the directory holding the daemon's %s)", err, daemon.StateFile)
	}
	st, err := storage.Open(path, storage.Options{LockTimeout: lockWait})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s is locked: %w Stop it first: %w", path, ErrLocked, err)
		}
		return nil, err
	}
	return st, nil
}

// VerifyStore verifies the audit chain of a stopped daemon's state file in dataDir
// (storage.Store.VerifyAudit). Signatures are not checked there: they travel with the
// events on Kafka (VerifyAudits).
func VerifyStore(dataDir string) (ChainReport, error) {
	path := filepath.Join(dataDir, daemon.StateFile)
	rep := ChainReport{Source: "store:" + path, Forged: []ForgedRecord{},
		Signatures: "not applicable: the store's chain is read from the file (signatures travel with the events on Kafka)"}
	st, err := openStopped(dataDir)
	if err != nil {
		return rep, err
	}
	defer st.Close()
	verr := st.VerifyAudit()
	var brk *storage.AuditBreakError
	switch {
	case verr == nil:
	case errors.As(verr, &brk):
		seq := brk.Seq
		rep.FirstBadSeq = &seq
		rep.Reason = brk.Reason
	default:
		return rep, fmt.Errorf("verifying %s: %w", path, verr)
	}
	err = st.View(func(tx *storage.ReadTx) error {
		n := 0
		cerr := tx.ForEachAudit(1, func(a storage.AuditRecord) error {
			n++
			if rep.FirstBadSeq == nil || a.Seq < *rep.FirstBadSeq {
				rep.Head = hex.EncodeToString(a.Hash[:])
			}
			return nil
		})
		rep.Records = n
		return cerr
	})
	if err != nil && rep.FirstBadSeq == nil {
		return rep, fmt.Errorf("reading the audit records of %s: %w", path, err)
	}
	rep.OK = rep.FirstBadSeq == nil
	return rep, nil
}

// ExportStored exports model version (0: the newest) from a stopped daemon's state file
// in dataDir, written under cfg (daemon.ExportStored: refused when cfg's model, weights,
// sketch or seed differ from the ones the file was written with).
func ExportStored(cfg config.Config, dataDir string, version uint64) (daemon.ModelExport, error) {
	st, err := openStopped(dataDir)
	if err != nil {
		return daemon.ModelExport{}, err
	}
	defer st.Close()
	e, err := daemon.ExportStored(cfg, st, version)
	if err != nil {
		return e, fmt.Errorf("%s: %w", dataDir, err)
	}
	return e, nil
}

// CheckStore runs the full check of a stopped daemon's state file in dataDir
// (storage.CheckFile: bbolt's page check, every record's decoder, the audit chain, the
// point count, the pool records' points), opened read-only and never modified, waiting
// up to lockTimeout for its lock. A file too damaged to open (truncated, unreadable meta
// pages, unknown format) is still a report, with the reason as its one problem; the
// error is for a file that could not be checked: locked (ErrLocked) or unreadable.
func CheckStore(dataDir string, lockTimeout time.Duration) (*storage.CheckReport, error) {
	path := filepath.Join(dataDir, daemon.StateFile)
	rep, err := storage.CheckFile(path, storage.Options{LockTimeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked: %w (a running daemon holds the file: stop it first): %w", path, ErrLocked, err)
	}
	if err != nil && !errors.Is(err, storage.ErrDamaged) && !errors.Is(err, storage.ErrUnknownFormat) && !errors.Is(err, storage.ErrCorrupt) {
		return nil, err
	}
	if err != nil {
		rep = &storage.CheckReport{Path: path, Keys: map[string]int{}, Problems: []string{err.Error()}, ProblemCount: 1}
	}
	return rep, nil
}
