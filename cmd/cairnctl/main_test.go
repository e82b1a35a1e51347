package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/cli"
)

// cmdRun runs `cairnctl NAME ARGS...` (NAME may be "verify srht") with stdout on out
// and returns the command's error, which wraps what the command returned.
func cmdRun(name string, args []string, out io.Writer) error {
	return root().Run(context.Background(), append(strings.Fields(name), args...), cli.Stdio{Out: out, Err: io.Discard})
}

// TestHelp checks the one help rule at every level of the command tree: -h, --help and
// "help" print the usage on stdout, nothing on stderr, and exit 0.
func TestHelp(t *testing.T) {
	var walk func(path []string, c *cli.Command)
	walk = func(path []string, c *cli.Command) {
		forms := [][]string{{"-h"}, {"--help"}}
		if len(c.Subcommands) > 0 {
			forms = append(forms, []string{"help"})
		}
		for _, f := range forms {
			args := append(slices.Clone(path), f...)
			code, out, errs := runCmd(args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: "+strings.Join(append([]string{"cairnctl"}, path...), " ")) {
				t.Errorf("cairnctl %v: exit %d, stdout %.80q, stderr %.80q; want 0, the usage on stdout, nothing on stderr", args, code, out, errs)
			}
			if c.Flags != nil && !strings.Contains(out, "flags:") {
				t.Errorf("cairnctl %v: usage %.200q lists no flags", args, out)
			}
		}
		for _, s := range c.Subcommands {
			walk(append(slices.Clone(path), s.Name), s)
		}
	}
	walk(nil, root())
}

// TestUsageErrors checks that invocation errors print the error and the usage on
// stderr, nothing on stdout, and exit 2.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"verify"},
		{"verify", "nope"},
		{"entk", "gram"},
		{"model", "nope"},
		{"verify", "srht", "--nope"},
		{"verify", "srht", "--P", "x"},
		{"verify", "srht", "extra"},
		{"status", "help"},
	} {
		code, out, errs := runCmd(args...)
		if code != 2 || out != "" || !strings.Contains(errs, "usage: cairnctl") {
			t.Errorf("cairnctl %v: exit %d, stdout %.80q, stderr %.120q; want 2, nothing on stdout, error and usage on stderr", args, code, out, errs)
		}
	}
	// A command that fails after a good invocation exits 1 without the usage.
	code, _, errs := runCmd("verify", "srht", "--P", "1")
	if code != 1 || !strings.HasPrefix(errs, "cairnctl verify srht: --P") || strings.Contains(errs, "usage:") {
		t.Errorf("verify srht --P 1: exit %d, stderr %q; want 1 and the error alone", code, errs)
	}
}
