package main

import (
	"context"
	"flag"
	"strings"

	"github.com/cairnhq/cairn/internal/cli"
	"github.com/cairnhq/cairn/internal/lab/identify"
	"github.com/cairnhq/cairn/internal/lab/offline"
	"github.com/cairnhq/cairn/internal/lab/reproduce"
)

// reproduceCmd is `cairnctl reproduce --table NAME [--quick]`: regenerate a table of the
// paper from cairn's code and print the paper's number beside cairn's in every cell
// (reproduce.Command; its identifiability cells run cairnctl audit's table, auditOf).
func reproduceCmd(fs *flag.FlagSet) cli.Func {
	c := reproduce.Command{Audit: auditOf}
	fs.StringVar(&c.Table, "table", "", "table to regenerate: "+strings.Join(reproduce.Names(), " | ")+" | all")
	fs.BoolVar(&c.Quick, "quick", false, "reduced sizes (minutes per table on 2 cores) instead of the paper's settings (tab:hparams)")
	fs.StringVar(&c.Format, "format", "json", "output: json (one indented object per table) | markdown (the paper's number beside cairn's in every cell)")
	fs.StringVar(&c.Adult, "adult", "", "directory with adult.data/adult.test; without it the Adult rows are not run (cairn null)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of every draw and fit")
	fs.StringVar(&c.From, "from", "", "render saved JSON runs (this command's json output; several files comma-separated, their tables merged) instead of running; --table, when given, picks one")
	fs.StringVar(&c.Data, "data", "", "run only this data set's rows: mnist | adult (default both); merge the parts with --from")
	fs.StringVar(&c.Resume, "resume", "", "continue a saved JSON run (this command's json output) of the same --table, size, --seed and --data: the cells it computed are kept and their fits skipped, a table it completed is kept whole")
	return func(ctx context.Context, stdio cli.Stdio) error {
		return c.Run(ctx, stdio.Out, stdio.Err)
	}
}

// auditOf is reproduce's Auditor: cairnctl audit's identifiability table
// (identify.Table) of m.
func auditOf(m *offline.Model, data string, k, random int, seed uint64) (*reproduce.Audit, error) {
	rep, err := identify.Table(m, data, k, random, seed)
	if err != nil {
		return nil, err
	}
	a := &reproduce.Audit{RandomEffects: rep.RandomEffects, Rankings: map[string]*reproduce.AuditRanking{}}
	for name, r := range rep.Rankings {
		a.Rankings[name] = &reproduce.AuditRanking{PercentileMedian: r.PercentileMedian, Percentiles: r.Percentiles, Effects: r.Effects}
	}
	return a, nil
}
