package main

import "io"

// runVerify is a placeholder until its issue lands.
func runVerify(args []string, stdout io.Writer) error { return errNotImplemented }
