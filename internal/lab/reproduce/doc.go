// Package reproduce runs cairnctl reproduce: it regenerates tables of the paper from
// cairn's own code and prints the paper's number beside cairn's in every cell.
//
// Each table (Names) has the paper's cells transcribed in paper.go, the only constants
// here; its runner computes cairn's value of exactly those cells with the code the
// daemon and the other commands run: the verify studies (internal/lab/verify), the
// selections and fits of internal/lab/offline, and cairnctl audit's identifiability
// table, which cairnctl passes in as an Auditor (Command.Audit). A cell's match allows
// the paper's rounding, cairn's measured noise and a tolerance stated in the cell; a
// cell cairn cannot compute is null with a note, never a made-up number.
//
// # Runs, interruptions and merges
//
// A run writes each table as one JSON object (Write) or as Markdown (WriteMarkdown). A
// table interrupted by its context keeps the cells computed so far, the rest reading
// "not computed", and says so in its settings; Command.Resume continues such a run,
// keeping its computed cells and skipping their work, bit for bit as a run from the
// start would compute the rest. Runs of disjoint data sets (Command.Data) merge with
// Command.From, their summary rows derived again from the merged cells.
//
// # Contracts
//
//   - Every draw and fit is seeded by Command.Seed through the named streams of the
//     packages it calls, so a table is a function of its size, seed and data, timings
//     aside.
//   - The Adult rows run only from the user's copy of UCI Adult given as Command.Adult
//     (the directory of adult.data and adult.test, passed on as the data spec
//     "adult:DIR"); without it they read "not run".
//   - One data set's featurized training rows are cached between the fits of a table
//     (offline.BlockCache); nothing else is kept between tables or calls.
//   - Errors name the offending setting by its cairnctl flag.
package reproduce
