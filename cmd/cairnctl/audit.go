package main

import "io"

// runAudit is a placeholder until its issue lands.
func runAudit(args []string, stdout io.Writer) error { return errNotImplemented }
