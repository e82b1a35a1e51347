// Command cairnctl is cairn's operator CLI: the offline tools (verify, entk, select, fit,
// explain, audit, bench) that run the same code as the daemon, and, as the daemon grows,
// the Kafka-facing commands. Every command prints one JSON object on stdout; diagnostics
// go to stderr; a non-zero exit means the command failed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/internal/gemm"
)

// command runs one subcommand with its arguments (after the command name) and writes its
// JSON result to stdout.
type command func(args []string, stdout io.Writer) error

var commands = map[string]command{
	"verify":  runVerify,
	"entk":    runEntk,
	"select":  runSelect,
	"fit":     runFit,
	"explain": runExplain,
	"audit":   runAudit,
	"produce": runProduce,
	"query":   runQuery,
	"delete":  runDelete,
	"status":  runStatus,
	"demo":    runDemo,
	"bench":   runBench,
	"train":   runTrain,
	"model":   runModel,
}

func main() {
	blas64.Use(gemm.Implementation{}) // the fits' matrix products (internal/gemm)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cairnctl: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd(args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "cairnctl %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: cairnctl COMMAND [flags]\ncommands: %s\nrun 'cairnctl COMMAND -h' for the flags of one command\n", strings.Join(names, ", "))
}
