package lint

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// machinePath matches an absolute path of a build machine: this team's checkout and
// shared files (the main and shared directories under /work), root's home, and any
// user's home directory.
// A file that names one works only on that machine; a test's files belong in
// t.TempDir(), a user's in a flag or argument, and a document says DIR or a path
// relative to the repository. The pattern is assembled so that this file does not
// match it.
var machinePath = regexp.MustCompile(`(^|[^A-Za-z0-9_.~-])(` + "/" + `work/(main|shared)\b|` + "/" + `root/|` + "/" + `home/[a-z_][a-z0-9_-]*/)`)

// outsideFile matches a reference to a file that sits beside this team's checkouts and
// never in a clone: the design and style notes kept outside the repository, and the
// shared directory next to the checkout. The manual is docs/; data a test may compare
// with comes from a flag or an environment variable.
var outsideFile = regexp.MustCompile(`\b(` + "DESIGN" + `|` + "STYLE" + `)\.md\b|(\.\./)+` + "shared" + `/`)

// trackedFiles lists the repository's files relative to root: git's tracked files when
// git and the repository are there (what a clone holds), else every file under root but
// .git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestNoMachinePaths: no tracked text file names an absolute path of a build machine
// (machinePath). Binary files (a NUL byte in their first 8 KiB: weights, compressed
// data, images, fuzz corpora of bytes) are skipped.
func TestNoMachinePaths(t *testing.T) {
	files := trackedFiles(t)
	if len(files) < 50 {
		t.Fatalf("found %d files under %s; is the module root right?", len(files), root)
	}
	var found []string
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree, not yet in the index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8192)], 0) >= 0 {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := machinePath.FindStringSubmatch(line); m != nil {
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+m[2]+": an absolute path of a build machine (use t.TempDir(), a flag, DIR or a repository-relative path)")
			}
			if m := outsideFile.FindString(line); m != "" {
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+m+": a file outside the repository (cite docs/, or take the path from a flag or variable)")
			}
		}
	}
	for _, f := range found {
		t.Error(f)
	}
}
