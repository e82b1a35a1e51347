// Package produce streams the rows of a data set to a cairn daemon as upserts, with a
// progress report, for the tools that feed one (cairnctl produce, cairnctl demo).
//
// # Contracts
//
//   - Rows sends rows in order, one acknowledged call per batch, and returns how many
//     rows were acknowledged: exact on error, the rows of the failed batch not counted.
//     It stops before the next batch once ctx ends. The data set is not modified.
//   - A Progress writes to one writer from one goroutine; a nil *Progress reports
//     nothing. On a terminal it redraws one bar in place, elsewhere it writes a line at
//     most every Every, so logs stay readable.
package produce
