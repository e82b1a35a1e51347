package main

import "io"

// runExplain is a placeholder until its issue lands.
func runExplain(args []string, stdout io.Writer) error { return errNotImplemented }
