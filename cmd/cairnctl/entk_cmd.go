package main

import "io"

// runEntk is a placeholder until its issue lands.
func runEntk(args []string, stdout io.Writer) error { return errNotImplemented }
