package main

import "io"

// runFit is a placeholder until its issue lands.
func runFit(args []string, stdout io.Writer) error { return errNotImplemented }
