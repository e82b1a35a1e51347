package stream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// kfake's Compact rewrites the segments that lose records one after another, each by
// writing new files and renaming them over the old (third_party/kfake/compact.go), which
// is not atomic for a partition: a process killed in between restarts with some
// segments compacted and some not, or with a renamed segment beside the old one it
// replaces. Upstream kfake removed a partition's files and wrote new ones: a process
// killed in between restarted with the partition empty, its acknowledged records lost
// (seen as "stored offset beyond partition end" after a kill -9 of cairnd during an
// erasure compaction). The guard makes it atomic from the
// outside, at the cost of one hard link per partition file:
//
//  1. before compacting, every file under DataDir/partitions is hard-linked into
//     DataDir/compact-guard.tmp, which is then renamed to DataDir/compact-guard (the
//     marker that a compaction is in progress; the links keep the old contents, since
//     kfake replaces or removes files rather than writing into them);
//  2. after Compact returns, the guard is renamed to DataDir/compact-guard.done and that
//     is removed: the rename retires the guard at once, since removing a directory
//     tree is not atomic, and a kill in the middle of it left a partial guard, which
//     step 3 then "restored", losing the segment files already removed from it (seen:
//     a partition restarting empty after a kill during the release);
//  3. StartBroker, finding a guard, restores every partition directory of the guard to
//     the guarded contents (the state before the interrupted compaction; the erasure
//     it was for runs again, as the daemon compacts before publishing the audits) and
//     retires the guard the same way; a leftover compact-guard.tmp means the
//     compaction never started, a leftover compact-guard.done that it finished, and
//     both are removed.
const (
	guardDir     = "compact-guard"
	guardTmpDir  = "compact-guard.tmp"
	guardDoneDir = "compact-guard.done"
)

// guardPartitions links DataDir/partitions into the guard (step 1).
func guardPartitions(dataDir string) error {
	src, tmp, guard := filepath.Join(dataDir, "partitions"), filepath.Join(dataDir, guardTmpDir), filepath.Join(dataDir, guardDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		return os.Link(p, dst)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing persisted yet
	}
	if err != nil {
		return fmt.Errorf("stream: guard the partition files before compacting: %w", err)
	}
	return os.Rename(tmp, guard)
}

// releaseGuard retires the guard after a compaction returned (step 2).
func releaseGuard(dataDir string) error {
	done := filepath.Join(dataDir, guardDoneDir)
	if err := os.Rename(filepath.Join(dataDir, guardDir), done); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(done)
}

// restoreGuard undoes an interrupted compaction (step 3). It reports whether it did.
func restoreGuard(dataDir string) (bool, error) {
	for _, d := range []string{guardTmpDir, guardDoneDir} {
		if err := os.RemoveAll(filepath.Join(dataDir, d)); err != nil {
			return false, err
		}
	}
	guard := filepath.Join(dataDir, guardDir)
	parts, err := os.ReadDir(guard)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, pd := range parts {
		if !pd.IsDir() {
			continue
		}
		live, saved := filepath.Join(dataDir, "partitions", pd.Name()), filepath.Join(guard, pd.Name())
		if err := os.RemoveAll(live); err != nil {
			return false, err
		}
		if err := os.MkdirAll(live, 0o755); err != nil {
			return false, err
		}
		files, err := os.ReadDir(saved)
		if err != nil {
			return false, err
		}
		for _, f := range files {
			if err := os.Link(filepath.Join(saved, f.Name()), filepath.Join(live, f.Name())); err != nil {
				return false, err
			}
		}
	}
	return true, releaseGuard(dataDir)
}
