package main

import "github.com/cairnhq/cairn/internal/cli"

// jsonOut returns the end of a command that computes one report: given the report and
// the error of computing it, it returns the error, else writes the report as JSON on
// stdio.Out (writeJSON). Use it as jsonOut(stdio)(compute()).
func jsonOut(stdio cli.Stdio) func(v any, err error) error {
	return func(v any, err error) error {
		if err != nil {
			return err
		}
		return writeJSON(stdio.Out, v)
	}
}
