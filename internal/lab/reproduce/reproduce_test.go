package reproduce

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// command runs c as cairnctl reproduce does, with its defaults (json, seed 1) where c
// leaves them zero, writing the tables to out.
func command(ctx context.Context, c Command, out io.Writer) error {
	if c.Format == "" {
		c.Format = "json"
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c.Run(ctx, out, io.Discard)
}

// TestCommandRefuses checks that a bad --table, --format, --data or --resume fails at
// once, naming the valid values or the file's fault, before any table runs.
func TestCommandRefuses(t *testing.T) {
	srhtRun := filepath.Join(t.TempDir(), "srht.json")
	saved := &Table{Name: "srht", Settings: map[string]any{}, Cells: []Cell{{Row: "r", Column: "c"}}}
	var b bytes.Buffer
	if err := Write(&b, saved, "json"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(srhtRun, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Command
		want []string
	}{
		{Command{Table: "nope"}, append(Names(), `"nope"`, "all")},
		{Command{}, append(Names(), "--table is required")},
		{Command{Table: "SRHT"}, Names()},
		{Command{Table: "srht", Format: "csv"}, []string{"--format", "json", "markdown"}},
		{Command{Table: "coverage", Data: "cifar"}, []string{"--data", "mnist", "adult"}},
		{Command{Table: "coverage", Data: "adult"}, []string{"--adult DIR"}},
		{Command{Table: "deff", From: "a.json", Resume: "b.json"}, []string{"--resume", "--from"}},
		{Command{Table: "deff", Resume: filepath.Join(t.TempDir(), "none.json")}, []string{"--resume", "none.json"}},
		{Command{Table: "deff", Resume: srhtRun}, []string{"--resume", "no table deff"}},
	} {
		t0 := time.Now()
		var out bytes.Buffer
		err := command(context.Background(), tc.c, &out)
		if err == nil {
			t.Errorf("%+v: no error", tc.c)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not name %q", tc.c, err, w)
			}
		}
		if out.Len() != 0 || time.Since(t0) > time.Second {
			t.Errorf("%+v: wrote %d bytes in %v before failing; want nothing, at once", tc.c, out.Len(), time.Since(t0))
		}
	}
}

// TestReproducePaperComplete checks the transcribed paper numbers: every table has
// them, every cell has a printed value and a range, no cell repeats, and the tables that
// are grids in the paper have every (row, column) cell.
func TestReproducePaperComplete(t *testing.T) {
	wantCells := map[string]int{ // rows × columns of the paper's table
		"srht": 9, "two-axis": 7, "deff": 4 * 6, "coverage": 9 * 6, "d3-merged": 7 * 5, // with the summary rows
		"cairn-vs-krepes": 6 * 6, "table1-all": 6 * 3, "deletion": 6 * 2,
	}
	for _, name := range Names() {
		cells := paperTables[name]
		if len(cells) != wantCells[name] {
			t.Errorf("table %s: %d paper cells, want %d", name, len(cells), wantCells[name])
		}
		var rows, cols []string
		seen := map[[2]string]bool{}
		for _, c := range cells {
			key := [2]string{c.Row, c.Column}
			if seen[key] {
				t.Errorf("table %s: cell %v twice", name, key)
			}
			seen[key] = true
			if c.Text == "" || c.Label == "" || !(c.Lo <= c.Hi) || math.IsNaN(c.Lo) {
				t.Errorf("table %s: cell %v: text %q, label %q, range [%v, %v]; want a printed value, its source and a range", name, key, c.Text, c.Label, c.Lo, c.Hi)
			}
			if !slices.Contains(rows, c.Row) {
				rows = append(rows, c.Row)
			}
			if !slices.Contains(cols, c.Column) {
				cols = append(cols, c.Column)
			}
		}
		if name != "srht" && name != "two-axis" && len(rows)*len(cols) != len(cells) {
			t.Errorf("table %s: %d rows × %d columns but %d cells: the grid has holes", name, len(rows), len(cols), len(cells))
		}
	}
}

// TestReproduceMarkdown renders a fixed two-cell table.
func TestReproduceMarkdown(t *testing.T) {
	v, noise := 0.987, 0.0123
	tb := &Table{Name: "demo", Label: "tab:demo", Seconds: 1.4, Matched: 1,
		Settings: map[string]any{"size": Size{Quick: true}},
		Cells: []Cell{
			{Row: "a|b", Column: "ratio", Paper: "0.96–1.03", Cairn: &v, Noise: &noise, Match: true, Note: "a note"},
			{Row: "c", Column: "pass?", Paper: "pass", Note: "not run"},
		}}
	var b strings.Builder
	if err := WriteMarkdown(&b, tb); err != nil {
		t.Fatal(err)
	}
	want := "### demo (tab:demo)\n\n" +
		"quick run, 1 s; 1 of 2 cells match. Each cell: paper / cairn.\n\n" +
		"| | ratio | pass? |\n" +
		"| --- | --- | --- |\n" +
		"| a\\|b | 0.96–1.03 / 0.99 ± 0.01 ✓ | |\n" +
		"| c | | pass / — |\n\n" +
		"* a note\n* not run\n\n"
	if got := b.String(); got != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", got, want)
	}
}

// TestReproduceSRHT runs the cheapest tables end to end through the command (quick
// srht and two-axis: well under a second each) and checks the JSON shape and that every
// number is finite.
func TestReproduceSRHT(t *testing.T) {
	for _, name := range []string{"srht", "two-axis"} {
		var out bytes.Buffer
		if err := command(context.Background(), Command{Table: name, Quick: true}, &out); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Name     string           `json:"name"`
			Settings map[string]any   `json:"settings"`
			Seconds  *float64         `json:"seconds"`
			Matched  int              `json:"matched"`
			Cells    []map[string]any `json:"cells"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out.String())
		}
		if got.Name != name || got.Settings == nil || got.Seconds == nil || len(got.Cells) != len(paperTables[name]) {
			t.Fatalf("%s: name %q, settings %v, seconds %v, %d cells; want %d cells", name, got.Name, got.Settings, got.Seconds, len(got.Cells), len(paperTables[name]))
		}
		for _, c := range got.Cells {
			for _, k := range []string{"row", "column", "paper", "paper_range", "cairn", "match"} {
				if _, ok := c[k]; !ok {
					t.Errorf("%s: cell %v lacks %q", name, c, k)
				}
			}
			v, ok := c["cairn"].(float64)
			if c["row"] == "u=v=e_j" {
				// Φ = 0: predicted and measured variance are both 0, the ratio undefined.
				if c["cairn"] != nil || c["match"] != true {
					t.Errorf("%s: u=v=e_j cell %v; want cairn null and a match", name, c)
				}
				continue
			}
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s: cell %v: cairn not a finite number", name, c)
			}
		}
	}
}

// TestReproduceTableUnknown checks the function behind the command.
func TestReproduceTableUnknown(t *testing.T) {
	_, err := runTable(context.Background(), "nope", quickSize("nope"), "", 1, io.Discard, "", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "srht") {
		t.Errorf("runTable(nope): %v; want an error naming the tables", err)
	}
}

// TestReproduceFrom runs two quick tables to a saved JSON file and renders it with
// --from: the Markdown must be what the run itself renders (pass/fail cells and the
// quick heading included), --table picks one table, and a damaged file, an unknown table
// name and a table absent from the file are errors.
func TestReproduceFrom(t *testing.T) {
	dir := t.TempDir()
	var saved, direct bytes.Buffer
	for _, name := range []string{"srht", "two-axis"} {
		var js, md bytes.Buffer
		if err := command(context.Background(), Command{Table: name, Quick: true}, &js); err != nil {
			t.Fatal(err)
		}
		saved.Write(js.Bytes())
		ts, err := ReadTables(bytes.NewReader(js.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteMarkdown(&md, ts[0]); err != nil {
			t.Fatal(err)
		}
		direct.Write(md.Bytes())
	}
	file := dir + "/run.json"
	if err := os.WriteFile(file, saved.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := command(context.Background(), Command{From: file, Format: "markdown"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != direct.String() || !strings.Contains(out.String(), "quick run") {
		t.Fatalf("--from markdown:\n%s\nwant:\n%s", out.String(), direct.String())
	}
	out.Reset()
	if err := command(context.Background(), Command{From: file, Table: "two-axis"}, &out); err != nil {
		t.Fatal(err)
	}
	ts, err := ReadTables(&out)
	if err != nil || len(ts) != 1 || ts[0].Name != "two-axis" {
		t.Fatalf("--table two-axis picked %d tables (%v)", len(ts), err)
	}
	// A pass/fail cell keeps its rendering after the round trip.
	pf := &Table{Name: "deletion", Label: "x", Settings: map[string]any{"size": Size{}},
		Cells: []Cell{{Row: "r", Column: "c", Paper: "pass", Cairn: new(float64(passValue)), Match: true}}}
	var js bytes.Buffer
	if err := Write(&js, pf, "json"); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTables(&js)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, back[0]); err != nil || !strings.Contains(md.String(), "pass / pass ✓") || !strings.Contains(md.String(), "full run") {
		t.Fatalf("pass/fail round trip: %q (%v)", md.String(), err)
	}
	bad := dir + "/bad.json"
	os.WriteFile(bad, append(saved.Bytes()[:saved.Len()/2:saved.Len()/2], '}'), 0o644)
	for _, c := range []Command{
		{From: bad}, {From: file, Table: "nope"}, {From: file, Table: "deletion"}, {From: dir + "/missing.json"},
	} {
		if err := command(context.Background(), c, io.Discard); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestSummaryOfPaper derives the summary rows of tab:kappa-matched and tab:d3-merged
// from the paper's own cells and checks them against the paper's printed summary rows
// (within its rounding, 0.005): the paper is the oracle for the rank and ratio rules
// (ties share the mean rank; ratios to the row's best). A planted rule (ties taking the
// lowest rank) is shown to fail the same check.
func TestSummaryOfPaper(t *testing.T) {
	grid := func(name string, cols []item) (vals [][]float64, summary map[string][]float64) {
		summary = map[string][]float64{}
		for _, r := range tableRows(datasetsMNISTFirst) {
			row := make([]float64, len(cols))
			for j, c := range cols {
				i := slices.IndexFunc(paperTables[name], func(p paperCell) bool { return p.Row == r && p.Column == c.name })
				row[j] = paperTables[name][i].Lo
			}
			vals = append(vals, row)
		}
		for _, p := range paperTables[name] {
			if p.Row == summaryMeanRank || p.Row == summaryMeanRatio || p.Row == summaryWorstRatio {
				j := slices.IndexFunc(cols, func(c item) bool { return c.name == p.Column })
				if summary[p.Row] == nil {
					summary[p.Row] = make([]float64, len(cols))
				}
				summary[p.Row][j] = p.Lo
			}
		}
		return vals, summary
	}
	// near reports whether got matches want in every column but skip (-1: none).
	near := func(what string, got, want []float64, skip int) bool {
		ok := true
		for j := range want {
			if j != skip && math.Abs(got[j]-want[j]) > 0.005+1e-12 {
				t.Logf("%s column %d: derived %.4f, paper %.2f", what, j, got[j], want[j])
				ok = false
			}
		}
		return ok
	}
	vals, want := grid("coverage", selectors)
	rank, ratio, worst := summaryOf(vals, true)
	// The paper's DPP mean ratio, 1.39, does not follow from its own DPP column
	// (96/55, 31/31, 68/42, 2/2, 5/2, 2/2: mean 1.477); the other 17 summary cells do.
	dpp := slices.IndexFunc(selectors, func(c item) bool { return c.flag == "dpp" })
	if !near("coverage mean rank", rank, want[summaryMeanRank], -1) || !near("coverage mean ratio", ratio, want[summaryMeanRatio], dpp) ||
		!near("coverage worst ratio", worst, want[summaryWorstRatio], -1) {
		t.Error("coverage: derived summary rows differ from the paper's")
	}
	if math.Abs(ratio[dpp]-(96.0/55+1+68.0/42+1+2.5+1)/6) > 1e-12 || math.Abs(ratio[dpp]-want[summaryMeanRatio][dpp]) < 0.05 {
		t.Errorf("DPP mean ratio %.4f: want 1.477 from the paper's cells, unlike its printed %.2f", ratio[dpp], want[summaryMeanRatio][dpp])
	}
	ivals, iwant := grid("d3-merged", inits)
	if irank, _, _ := summaryOf(ivals, false); !near("d3-merged mean rank", irank, iwant[summaryMeanRank], -1) {
		t.Error("d3-merged: derived mean rank differs from the paper's")
	}
	// Planted rule: ties take the lowest rank (subtract the tie bonus back out).
	low := slices.Clone(rank)
	for _, row := range vals {
		for j, v := range row {
			nt := 0.0
			for _, w := range row {
				if w == v {
					nt++
				}
			}
			low[j] -= (nt - 1) / 2 / float64(len(vals))
		}
	}
	if near("planted", low, want[summaryMeanRank], -1) {
		t.Error("the lowest-rank tie rule also matches the paper: the test cannot tell the rules apart")
	}
	// An uncovered pool (+Inf) ranks last and makes the column's ratios infinite.
	r2, m2, w2 := summaryOf([][]float64{{3, math.Inf(1), 2}}, true)
	if r2[1] != 3 || r2[2] != 1 || !math.IsInf(m2[1], 1) || !math.IsInf(w2[1], 1) || m2[0] != 1.5 {
		t.Errorf("with +Inf: ranks %v, ratios %v, worst %v", r2, m2, w2)
	}
}

// TestMergeTables merges two --data runs of coverage: each cell comes from the run that
// computed it, the summary rows are derived again over all rows (not kept from either
// part), matches are recounted, and a cell computed twice is an error.
func TestMergeTables(t *testing.T) {
	part := func(only string) *Table {
		tb := &Table{Name: "coverage", Settings: map[string]any{"data": only}, Seconds: 10}
		for _, p := range paperTables["coverage"] {
			tb.Cells = append(tb.Cells, Cell{Row: p.Row, Column: p.Column, Paper: p.Text, PaperRange: [2]float64{p.Lo, p.Hi}, Note: "not computed"})
		}
		r := &runner{only: only, adultDir: "adult"}
		for _, row := range tableRows(datasetsMNISTFirst) {
			d := strings.ToLower(strings.Fields(row)[0])
			if r.dataSpec(d) == "" {
				tb.skip(row, r.notRun(d))
				continue
			}
			for _, c := range selectors {
				p := tb.cell(row, c.name).PaperRange[0]
				tb.set(row, c.name, p, math.NaN(), kappaTolerance(p), "") // the paper's own values
			}
		}
		setSummary(tb, tableRows(datasetsMNISTFirst), selectors, true, true)
		return tb
	}
	mn, ad := part("mnist"), part("adult")
	if v := *mn.cell(summaryWorstRatio, "k-means++").Cairn; math.Abs(v-78.0/42) > 1e-12 {
		t.Fatalf("MNIST-only worst ratio of k-means++: %v, want 78/42", v)
	}
	ts, err := mergeTables([]*Table{mn, ad})
	if err != nil || len(ts) != 1 {
		t.Fatalf("merge: %d tables, %v", len(ts), err)
	}
	m := ts[0]
	if v := m.cell(summaryWorstRatio, "k-means++").Cairn; v == nil || *v != 8.5 {
		t.Fatalf("merged worst ratio of k-means++: %v, want 8.5 (Adult BT 17/2)", *v)
	}
	if v := m.cell("Adult BT", "PC").Cairn; v == nil || *v != 3 || m.Seconds != 20 {
		t.Fatalf("merged Adult BT PC %v, seconds %v", v, m.Seconds)
	}
	// Every cell matches: the data cells are the paper's values, and the summary cells
	// follow from them (DPP's mean ratio, 1.477 against the paper's 1.39, within a quarter).
	if want := len(m.Cells); m.Matched != want {
		t.Errorf("matched %d of %d cells, want %d", m.Matched, len(m.Cells), want)
	}
	if _, err := mergeTables([]*Table{part("mnist"), part("mnist")}); err == nil {
		t.Error("two runs computing the same cells merged")
	}
}

// TestReproduceInterrupted checks that a table interrupted by its context (SIGINT or
// SIGTERM in the command) is still written, marked interrupted, with the cells it did not
// reach reading "not computed", and that the command reports the interruption.
func TestReproduceInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := command(ctx, Command{Table: "table1-all", Quick: true}, &out)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("reproduce on an ended context: %v; want an interruption error", err)
	}
	ts, rerr := ReadTables(&out)
	if rerr != nil || len(ts) != 1 {
		t.Fatalf("interrupted output: %d tables, %v\n%s", len(ts), rerr, out.String())
	}
	tb := ts[0]
	if _, ok := tb.Settings["interrupted"]; !ok || len(tb.Cells) != len(paperTables["table1-all"]) {
		t.Fatalf("settings %v, %d cells", tb.Settings, len(tb.Cells))
	}
	for _, c := range tb.Cells {
		if c.computed() || c.Cairn != nil {
			t.Fatalf("cell (%s, %s) computed on an ended context: %+v", c.Row, c.Column, c)
		}
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, tb); err != nil || !strings.Contains(md.String(), "interrupted") {
		t.Fatalf("markdown does not say interrupted: %q (%v)", md.String(), err)
	}
}

// TestReproduceDeff runs the deff table on a small MNIST subset (--data mnist) and checks
// each cell against what its note reports: every selector's pool is scored at both
// ridges, the cell is 100·|SLQ − exact|/exact of the reported values, SLQ lies within 5
// standard errors (or 2 %) of exact, d_eff lies in (0, M] and falls as the ridge grows
// (λ = 10 is above 10⁻³ × mean diag while the mean diag is below 10⁴), and the Adult
// rows say they were not run.
func TestReproduceDeff(t *testing.T) {
	size := quickSize("deff")
	size.N["mnist"], size.M["mnist"], size.H, size.S = 600, 16, 1, 128
	tb, err := runTable(context.Background(), "deff", size, "", 1, io.Discard, "mnist", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type got struct{ exact, slq, se, diag float64 }
	parse := func(c Cell) got {
		var g got
		i := strings.Index(c.Note, ": exact d_eff ")
		j := strings.LastIndex(c.Note, "mean diag K_mm ")
		if i < 0 || j < 0 {
			t.Fatalf("%s %s: note %q", c.Row, c.Column, c.Note)
		}
		var m int
		if _, err := fmt.Sscanf(c.Note[i:], ": exact d_eff %g of M = %d, SLQ %g ± %g", &g.exact, &m, &g.slq, &g.se); err != nil || m != 32 {
			t.Fatalf("%s %s: note %q: %v (M %d)", c.Row, c.Column, c.Note, err, m)
		}
		if _, err := fmt.Sscanf(c.Note[j:], "mean diag K_mm %g)", &g.diag); err != nil {
			t.Fatalf("%s %s: note %q: %v", c.Row, c.Column, c.Note, err)
		}
		return g
	}
	for _, s := range selectors {
		byRow := map[string]got{}
		for _, row := range []string{"MNIST", deffPaperRow("MNIST")} {
			c := *tb.cell(row, s.name)
			if c.Cairn == nil || c.Noise == nil {
				t.Fatalf("%s %s: not computed: %q", row, s.name, c.Note)
			}
			g := parse(c)
			// The note prints one decimal: the cell must agree with it to that rounding.
			if want := 100 * math.Abs(g.slq-g.exact) / g.exact; math.Abs(*c.Cairn-want) > 100*0.1/g.exact {
				t.Errorf("%s %s: cell %.4g, note gives %.4g", row, s.name, *c.Cairn, want)
			}
			if !(g.exact > 0 && g.exact <= 32+0.05) || math.Abs(g.slq-g.exact) > math.Max(5*g.se, 0.02*g.exact)+0.1 {
				t.Errorf("%s %s: exact %.1f, SLQ %.1f ± %.1f", row, s.name, g.exact, g.slq, g.se)
			}
			byRow[row] = g
		}
		fitR, paperR := byRow["MNIST"], byRow[deffPaperRow("MNIST")]
		if fitR.diag != paperR.diag || !(fitR.diag < 1e4) || !(paperR.exact < fitR.exact) {
			t.Errorf("%s: d_eff %.1f at the fit's ridge, %.1f at λ = 10 (mean diag %g)", s.name, fitR.exact, paperR.exact, fitR.diag)
		}
	}
	for _, row := range []string{"Adult", deffPaperRow("Adult")} {
		if c := tb.cell(row, "Random"); c.Cairn != nil || !strings.Contains(c.Note, "not run") {
			t.Errorf("%s: %v %q, want not run", row, c.Cairn, c.Note)
		}
	}
}

// TestReproduceResume continues an interrupted run (--resume) of table1-all and of deff
// on a small MNIST subset. The resumed run keeps the cells the saved run computed (a
// kept value altered in the saved run stays altered: it was not computed again), runs
// only the work of the rest (one fit for one missing row, the row whose cells were
// partly computed whole again), and computes those cells bit for bit as a run from the
// start does. A completed saved run is returned whole, and a saved run of another seed
// or size is refused.
func TestReproduceResume(t *testing.T) {
	ctx := context.Background()
	size := quickSize("table1-all")
	size.N["mnist"], size.M["mnist"], size.TestN["mnist"], size.H, size.S, size.K, size.Epochs = 600, 16, 300, 1, 128, 32, 3
	// save writes tb as --format json does and reads it back as --resume does.
	save := func(tb *Table) *Table {
		var b bytes.Buffer
		if err := Write(&b, tb, "json"); err != nil {
			t.Fatal(err)
		}
		ts, err := ReadTables(&b)
		if err != nil || len(ts) != 1 {
			t.Fatalf("read back: %d tables, %v", len(ts), err)
		}
		return ts[0]
	}
	fits := func(log string) int { return strings.Count(log, "reproduce: fit ") }
	val := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}

	full, err := runTable(ctx, "table1-all", size, "", 1, io.Discard, "mnist", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, missing, partial := "MNIST BT", "MNIST SimCLR", "MNIST VICReg"
	prior := save(full)
	prior.Settings["interrupted"] = "test"
	prior.Seconds = 1000
	const sentinel = 12.5
	for i := range prior.Cells {
		c := &prior.Cells[i]
		switch {
		case c.Row == kept && c.Column == "Acc (%)":
			v := sentinel
			c.Cairn = &v
		case c.Row == missing, c.Row == partial && c.Column == "κ_C":
			c.Cairn, c.Match, c.Note = nil, false, "not computed"
		}
	}
	var log bytes.Buffer
	res, err := runTable(ctx, "table1-all", size, "", 1, &log, "mnist", prior, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := fits(log.String()); n != 2 {
		t.Errorf("resumed run: %d fits, want 2 (rows %s and %s)\n%s", n, missing, partial, log.String())
	}
	if v := res.cell(kept, "Acc (%)").Cairn; v == nil || *v != sentinel {
		t.Errorf("%s Acc: %v, want the saved run's %v kept", kept, val(v), sentinel)
	}
	for i, c := range res.Cells {
		want := full.Cells[i]
		if c.Row == kept && c.Column == "Acc (%)" {
			continue
		}
		if (c.Cairn == nil) != (want.Cairn == nil) || c.Cairn != nil && *c.Cairn != *want.Cairn || c.Note != want.Note || c.Match != want.Match {
			t.Errorf("(%s, %s): resumed %v %q, from the start %v %q", c.Row, c.Column, val(c.Cairn), c.Note, val(want.Cairn), want.Note)
		}
	}
	rs, _ := res.Settings["resumed"].(map[string]any)
	if _, ok := res.Settings["interrupted"]; ok || rs == nil || rs["kept_cells"] != 3 || res.Seconds < 1000 {
		t.Errorf("settings %v, seconds %v; want resumed with 3 kept cells, not interrupted, seconds ≥ 1000", res.Settings, res.Seconds)
	}

	// A completed run is kept whole; another seed's or size's run is refused.
	log.Reset()
	whole, err := runTable(ctx, "table1-all", size, "", 1, &log, "mnist", save(full), nil)
	if err != nil || fits(log.String()) != 0 || *whole.cell(kept, "Acc (%)").Cairn != *full.cell(kept, "Acc (%)").Cairn {
		t.Errorf("resume of a completed run: %v, %d fits", err, fits(log.String()))
	}
	if _, err := runTable(ctx, "table1-all", size, "", 2, io.Discard, "mnist", prior, nil); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Errorf("resume of seed 1's run with seed 2: %v; want an error naming the seed", err)
	}
	other := size
	other.Epochs++
	if _, err := runTable(ctx, "table1-all", other, "", 1, io.Discard, "mnist", prior, nil); err == nil || !strings.Contains(err.Error(), "size") {
		t.Errorf("resume at another size: %v; want an error naming the size", err)
	}

	// deff: one selector's two cells missing → only that selector's pool is scored.
	dsize := quickSize("deff")
	dsize.N["mnist"], dsize.M["mnist"], dsize.H, dsize.S = 600, 16, 1, 128
	dfull, err := runTable(ctx, "deff", dsize, "", 1, io.Discard, "mnist", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dprior := save(dfull)
	dprior.Settings["interrupted"] = "test"
	for i := range dprior.Cells {
		if c := &dprior.Cells[i]; c.Column == "DPP" && c.Cairn != nil {
			c.Cairn, c.Note = nil, "not computed"
		}
	}
	log.Reset()
	dres, err := runTable(ctx, "deff", dsize, "", 1, &log, "mnist", dprior, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "exact "); n != 2 || !strings.Contains(log.String(), "MNIST DPP: λ") {
		t.Errorf("resumed deff scored %d pools, want DPP's 2:\n%s", n, log.String())
	}
	for i, c := range dres.Cells {
		want := dfull.Cells[i]
		if (c.Cairn == nil) != (want.Cairn == nil) || c.Cairn != nil && *c.Cairn != *want.Cairn || c.Note != want.Note {
			t.Errorf("deff (%s, %s): resumed %v %q, from the start %v %q", c.Row, c.Column, val(c.Cairn), c.Note, val(want.Cairn), want.Note)
		}
	}
}
