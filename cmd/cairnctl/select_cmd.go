package main

import "io"

// runSelect is a placeholder until its issue lands.
func runSelect(args []string, stdout io.Writer) error { return errNotImplemented }
