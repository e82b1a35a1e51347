// Package cli runs a tree of subcommands with one rule for help and errors at every
// level, so each command only registers its flags and does its work.
//
// # Contract
//
//   - -h, -help or --help (and "help" in place of a subcommand) prints the usage of the
//     command it follows on Stdio.Out and exits 0. A command that defines a flag named
//     h keeps it; a bare -h as its last argument still asks for help.
//   - A missing or unknown subcommand, an undefined or malformed flag, or a positional
//     argument a command does not take prints the error and the usage on Stdio.Err and
//     exits 2. A command that names positional arguments (Command.Args) takes them
//     between its flags, and its Func finds them in fs.Args().
//   - A command whose Func returns an error prints "PATH: ERROR" on Stdio.Err and exits 1.
//
// Commands write only to the Stdio they are given and stop when the context they are
// given ends; the caller owns both (cairnctl's main builds the context once with
// signal.NotifyContext).
//
// A Command tree is only read: each Run builds a fresh flag.FlagSet and calls the
// command's Flags on it, so the flag values of one run are never seen by another, and
// a tree may be run concurrently when its Flags functions keep no shared state.
package cli
