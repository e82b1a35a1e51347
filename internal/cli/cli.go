package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Stdio holds the streams a command reads and writes: results on Out, diagnostics and
// progress on Err.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Func runs a command once its flags are parsed.
type Func func(ctx context.Context, stdio Stdio) error

// Command is one node of a command tree: a leaf that has Flags, a group that has
// Subcommands, or both (the group runs its own Flags when its first argument names no
// subcommand).
type Command struct {
	Name     string // the word that selects the command
	Synopsis string // one line: what the command does
	// Flags registers the command's flags on fs and returns the Func that runs the
	// command with their parsed values. It is called once per run, before parsing.
	Flags       func(fs *flag.FlagSet) Func
	Subcommands []*Command
	// Args names the positional arguments a command with Flags takes, as its usage line
	// shows them ("FILE.onnx"); empty, it takes none. Flags may come before and after
	// them; its Func reads them with fs.Args() and checks their number.
	Args string
}

// ErrUsage matches (with errors.Is) every error in how a command was invoked: a missing
// or unknown subcommand, a bad flag, an unexpected argument.
var ErrUsage = errors.New("usage error")

// usageError is an error in how the command at path was invoked; Main reports it with
// that command's usage and exits 2.
type usageError struct {
	path  string
	err   error
	usage func(io.Writer)
}

func (e *usageError) Error() string        { return e.path + ": " + e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

// Main runs c with args (the words after c's own name), reports an error on
// stdio.Err, and returns the exit status: 0 on success or help, 1 when the command
// failed, 2 on a usage error (then c's usage follows the error).
func (c *Command) Main(ctx context.Context, args []string, stdio Stdio) int {
	err := c.Run(ctx, args, stdio)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stdio.Err, err)
	if ue, ok := errors.AsType[*usageError](err); ok {
		ue.usage(stdio.Err)
		return 2
	}
	return 1
}

// Run runs c with args (the words after c's own name). Help is printed on stdio.Out and
// returns nil. A returned error starts with the full name of the command that failed
// ("cairnctl verify srht: ...") and wraps the command's error; an invocation error also
// matches ErrUsage.
func (c *Command) Run(ctx context.Context, args []string, stdio Stdio) error {
	return c.run(ctx, c.Name, args, stdio)
}

// run dispatches args under c, whose full name is path.
func (c *Command) run(ctx context.Context, path string, args []string, stdio Stdio) error {
	if len(args) > 0 {
		if sub := c.sub(args[0]); sub != nil {
			return sub.run(ctx, path+" "+sub.Name, args[1:], stdio)
		}
	}
	if c.Flags == nil {
		usage := func(w io.Writer) { c.usage(w, path, nil) }
		switch {
		case len(args) == 0:
			return &usageError{path, errors.New("missing subcommand"), usage}
		case isHelp(args[0]) || (args[0] == "help" && len(args) == 1):
			usage(stdio.Out)
			return nil
		}
		return &usageError{path, fmt.Errorf("unknown subcommand %q", args[0]), usage}
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by Main
	fs.Usage = func() {}
	fn := c.Flags(fs)
	usage := func(w io.Writer) { c.usage(w, path, fs) }
	helpArg := len(c.Subcommands) > 0 && len(args) == 1 && args[0] == "help"
	// A command may define its own -h (cairnctl's head count, --h 4): there -h asks
	// for help only as the last argument, where it could not carry a value.
	helpArg = helpArg || (fs.Lookup("h") != nil && len(args) > 0 && isHelp(args[len(args)-1]))
	if helpArg {
		usage(stdio.Out)
		return nil
	}
	if err := c.parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdio.Out)
			return nil
		}
		return &usageError{path, err, usage}
	}
	if err := fn(ctx, stdio); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// parse parses args into fs, flags and (when c takes them) positional arguments in any
// order, and leaves the positional ones in fs.Args().
func (c *Command) parse(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if c.Args == "" {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	// "--" ends the flags, so what follows is fs.Args() and no flag changes.
	return fs.Parse(append([]string{"--"}, pos...))
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func (c *Command) sub(name string) *Command {
	for _, s := range c.Subcommands {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// usage writes c's usage line, synopsis, subcommands and flags (fs, when c has flags).
func (c *Command) usage(w io.Writer, path string, fs *flag.FlagSet) {
	switch {
	case len(c.Subcommands) > 0 && fs != nil:
		fmt.Fprintf(w, "usage: %s [flags]\n       %s SUBCOMMAND [flags]\n", path, path)
	case fs != nil && c.Args != "":
		fmt.Fprintf(w, "usage: %s %s [flags]\n", path, c.Args)
	case fs != nil:
		fmt.Fprintf(w, "usage: %s [flags]\n", path)
	default:
		fmt.Fprintf(w, "usage: %s SUBCOMMAND [flags]\n", path)
	}
	if c.Synopsis != "" {
		fmt.Fprintf(w, "\n%s\n", c.Synopsis)
	}
	if len(c.Subcommands) > 0 {
		width := 0
		for _, s := range c.Subcommands {
			width = max(width, len(s.Name))
		}
		fmt.Fprintf(w, "\nsubcommands:\n")
		for _, s := range c.Subcommands {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name, s.Synopsis)
		}
		fmt.Fprintf(w, "\nrun '%s SUBCOMMAND -h' for the flags of one\n", path)
	}
	if fs != nil {
		fmt.Fprintf(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}
