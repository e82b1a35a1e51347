package cli

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
)

// TestPositionalArgs: a command that names positional arguments takes them between its
// flags and finds them in fs.Args(); its usage line names them.
func TestPositionalArgs(t *testing.T) {
	var got []string
	var n int
	tree := &Command{Name: "tool", Subcommands: []*Command{{Name: "inspect", Args: "FILE", Flags: func(fs *flag.FlagSet) Func {
		p := fs.Int("n", 0, "a count")
		return func(context.Context, Stdio) error { got, n = fs.Args(), *p; return nil }
	}}}}
	for _, c := range []struct {
		args []string
		want []string
		n    int
	}{
		{[]string{"inspect", "a.onnx"}, []string{"a.onnx"}, 0},
		{[]string{"inspect", "a.onnx", "--n", "3"}, []string{"a.onnx"}, 3},
		{[]string{"inspect", "--n", "2", "a.onnx", "b.onnx"}, []string{"a.onnx", "b.onnx"}, 2},
		{[]string{"inspect", "--", "-odd.onnx"}, []string{"-odd.onnx"}, 0},
		{[]string{"inspect"}, nil, 0},
	} {
		got, n = nil, -1
		var errb bytes.Buffer
		if code := tree.Main(context.Background(), c.args, Stdio{Out: &bytes.Buffer{}, Err: &errb}); code != 0 {
			t.Fatalf("%v: exit %d, %s", c.args, code, errb.String())
		}
		if !slices.Equal(got, c.want) || n != c.n {
			t.Errorf("%v: args %q n %d, want %q and %d", c.args, got, n, c.want, c.n)
		}
	}
	var out bytes.Buffer
	tree.Main(context.Background(), []string{"inspect", "-h"}, Stdio{Out: &out, Err: &bytes.Buffer{}})
	if !strings.HasPrefix(out.String(), "usage: tool inspect FILE [flags]") {
		t.Errorf("usage %q", out.String())
	}
}
