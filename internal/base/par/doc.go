// Package par runs the row loops of the numeric packages on all cores, with results
// that do not depend on how many there are. For splits the rows 0 to n−1 into chunks of
// a fixed size and hands them to up to a given number of goroutines. Team does the same
// on workers started once for a run of many short loops (an optimizer's steps), which
// poll between loops instead of being started for each.
//
// # Contract
//
//   - The chunks are [c·size, min((c+1)·size, n)) for c = 0, 1, …: a function of n and
//     size alone, never of GOMAXPROCS or of the worker count. Each is passed to f exactly
//     once, with the index w < workers of the goroutine that runs it (for workspaces
//     owned by one goroutine); which goroutine takes which chunk is not fixed.
//   - For returns after every call of f has returned; it starts no goroutine when one
//     worker or one chunk suffices, and runs chunks on the calling goroutine too. It does
//     not recover panics: a panic in f crashes the program, as in a plain loop.
//   - Determinism is the caller's part: f writes only outputs that belong to its rows
//     (or to its chunk, c = lo/size), and anything summed across chunks is summed after
//     For returns, in chunk order. Each row then gets the operations of the serial loop
//     in the same order, so the results are bit for bit the serial loop's whatever the
//     workers (the callers test this against their serial loops).
package par
