package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func testTree(ran *string) *Command {
	leaf := func(name string) *Command {
		return &Command{Name: name, Synopsis: name + " things", Flags: func(fs *flag.FlagSet) Func {
			n := fs.Int("n", 1, "a count")
			return func(ctx context.Context, stdio Stdio) error {
				*ran = name
				if *n < 0 {
					return errors.New("--n: negative")
				}
				return ctx.Err()
			}
		}}
	}
	return &Command{Name: "tool", Subcommands: []*Command{
		{Name: "grp", Synopsis: "a group", Subcommands: []*Command{leaf("a")}},
		leaf("b"),
	}}
}

func TestCommandMain(t *testing.T) {
	for _, c := range []struct {
		args          []string
		code          int
		out, err, ran string
	}{
		{[]string{"b", "--n", "2"}, 0, "", "", "b"},
		{[]string{"grp", "a"}, 0, "", "", "a"},
		{[]string{"-h"}, 0, "usage: tool SUBCOMMAND", "", ""},
		{[]string{"help"}, 0, "usage: tool SUBCOMMAND", "", ""},
		{[]string{"grp", "--help"}, 0, "usage: tool grp SUBCOMMAND", "", ""},
		{[]string{"grp", "a", "-h"}, 0, "usage: tool grp a [flags]", "", ""},
		{nil, 2, "", "tool: missing subcommand\nusage: tool", ""},
		{[]string{"nope"}, 2, "", `tool: unknown subcommand "nope"`, ""},
		{[]string{"grp", "a", "--m"}, 2, "", "tool grp a: flag provided but not defined: -m\nusage: tool grp a", ""},
		{[]string{"b", "x"}, 2, "", `tool b: unexpected argument "x"`, ""},
		{[]string{"b", "--n", "-1"}, 1, "", "tool b: --n: negative\n", "b"},
	} {
		var out, errb bytes.Buffer
		ran := ""
		code := testTree(&ran).Main(context.Background(), c.args, Stdio{Out: &out, Err: &errb})
		if code != c.code || !strings.HasPrefix(out.String(), c.out) || !strings.HasPrefix(errb.String(), c.err) || ran != c.ran {
			t.Errorf("%v: got exit %d, stdout %q, stderr %q, ran %q; want %d, %q…, %q…, %q", c.args, code, out.String(), errb.String(), ran, c.code, c.out, c.err, c.ran)
		}
		if (c.out == "") != (out.Len() == 0) || (c.err == "") != (errb.Len() == 0) {
			t.Errorf("%v: stdout %q, stderr %q: output on the wrong stream", c.args, out.String(), errb.String())
		}
	}
}

func TestRunErrors(t *testing.T) {
	ran := ""
	err := testTree(&ran).Run(context.Background(), []string{"b", "--n", "x"}, Stdio{})
	if !errors.Is(err, ErrUsage) {
		t.Errorf("bad flag value: got %v, want ErrUsage", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = testTree(&ran).Run(ctx, []string{"b"}, Stdio{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUsage) || !strings.HasPrefix(err.Error(), "tool b: ") {
		t.Errorf("cancelled: got %v, want context.Canceled named by the command", err)
	}
}
