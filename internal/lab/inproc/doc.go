// Package inproc runs a cairn daemon in this process, embedded broker included, for the
// tools that drive one end to end (cairnctl bench): Start returns once the daemon is
// ready, with the addresses it bound; Client connects a package client to it; WaitModel
// and Poll watch its status; Close stops it.
//
// # Contracts
//
//   - Start starts one goroutine, daemon.Run, which Close joins; Close is idempotent,
//     returns Run's error (a cancellation is not one) and removes the data directory
//     when Start made it. A failed Start leaves nothing running.
//   - The daemon is the one cairnd runs (daemon.New with the given configuration and
//     logger); nothing here changes how it ingests, fits or answers.
//   - A Daemon's methods are for one goroutine at a time; D is safe for concurrent use
//     as package daemon documents.
package inproc
