package reproduce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/lab/offline"
)

// tables lists the tables of cairnctl reproduce in the order --table all runs them,
// each with the paper label it regenerates and its runner. A runner fills cairn's value
// of the table's paper cells (paperTables) from cairn's own code: the verify commands
// called as functions (verify), and the fit, audit and select code likewise.
func tables() []spec {
	return []spec{
		{"srht", "Thm. srht-exact, fig:theory(a)", tableSRHT},
		{"two-axis", "Prop. two-axis, fig:2b", tableTwoAxis},
		{"deff", "app. additional: SLQ vs exact d_eff", tableDeff},
		{"coverage", "tab:kappa-matched", tableCoverage},
		{"d3-merged", "tab:d3-merged", tableInit},
		{"cairn-vs-krepes", "tab:cairn-vs-krepes", tableKrepes},
		{"table1-all", "tab:table1-all", tableAll},
		{"deletion", "fig:acc-del(b)", tableDeletion},
	}
}

// spec names a table, the paper label it regenerates, and its runner.
type spec struct {
	name, label string
	run         func(ctx context.Context, r *runner, t *Table) error
}

// Names returns the names of the tables, in the order --table all runs them.
func Names() []string {
	var names []string
	for _, t := range tables() {
		names = append(names, t.name)
	}
	return names
}

// Command is cairnctl reproduce's settings, each named by its flag.
type Command struct {
	Table  string // --table: a name of Names, or all
	Quick  bool   // --quick: reduced sizes (Quick) instead of the paper's settings (Full)
	Format string // --format: json | markdown
	// Adult is --adult: the directory of the user's copy of UCI Adult (adult.data and
	// adult.test); "" leaves the Adult rows not run.
	Adult  string
	Seed   uint64 // --seed: seed of every draw and fit
	From   string // --from: saved JSON runs to render (comma-separated) instead of running
	Data   string // --data: run only this data set's rows (mnist | adult); "" both
	Resume string // --resume: a saved JSON run of the same table, size, seed and data to continue
	// Audit is cairnctl audit's identifiability table, which the cairn-vs-krepes and
	// deletion tables read; without it they fail.
	Audit Auditor
}

// Run regenerates the tables c names (or renders saved runs, --from) and writes each to
// out in c.Format as soon as it is done; progress lines go to progress. An interrupted
// table (ctx ended) is still written, its computed cells kept and the rest "not
// computed", and Run then returns the interruption.
func (c *Command) Run(ctx context.Context, out, progress io.Writer) error {
	if c.Format != "json" && c.Format != "markdown" {
		return fmt.Errorf("--format: %q, want json or markdown", c.Format)
	}
	if c.From != "" {
		if c.Resume != "" {
			return errors.New("--resume runs a table, --from renders saved ones: give one of them")
		}
		return renderSaved(c.From, c.Table, c.Format, out)
	}
	if c.Data != "" && !slices.ContainsFunc(datasets, func(d item) bool { return d.flag == c.Data }) {
		return fmt.Errorf("--data: %q, want mnist or adult", c.Data)
	}
	if c.Data == "adult" && c.Adult == "" {
		return fmt.Errorf("--data adult needs --adult DIR")
	}
	names, err := selectTables(c.Table)
	if err != nil {
		return err
	}
	priors := map[string]*Table{}
	if c.Resume != "" {
		if priors, err = readPriors(c.Resume, names); err != nil {
			return err
		}
	}
	for _, name := range names {
		size := fullSize()
		if c.Quick {
			size = quickSize(name)
		}
		t, err := runTable(ctx, name, size, c.Adult, c.Seed, progress, c.Data, priors[name], c.Audit)
		if err != nil && t == nil {
			return fmt.Errorf("--table %s: %w", name, err)
		}
		// An interrupted table is still written: its computed cells are kept (merge
		// them with a later run's through --from), the rest read "not computed".
		if e := Write(out, t, c.Format); e != nil {
			return e
		}
		if err != nil {
			return fmt.Errorf("--table %s: interrupted, computed cells written: %w", name, err)
		}
	}
	return nil
}

// readPriors reads the saved run of --resume: a sequence of table objects, at most one
// per name, at least one of names among them (a table the file lacks runs from the start).
func readPriors(file string, names []string) (map[string]*Table, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	defer f.Close()
	ts, err := ReadTables(f)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: %w", file, err)
	}
	priors := map[string]*Table{}
	for _, t := range ts {
		if _, ok := priors[t.Name]; ok {
			return nil, fmt.Errorf("--resume %s: table %s twice (resume one run; merge runs with --from)", file, t.Name)
		}
		if _, ok := t.Settings["merged"]; ok {
			return nil, fmt.Errorf("--resume %s: table %s is a merge of runs, not one run", file, t.Name)
		}
		priors[t.Name] = t
	}
	if !slices.ContainsFunc(names, func(n string) bool { return priors[n] != nil }) {
		return nil, fmt.Errorf("--resume %s: no table %s in it", file, strings.Join(names, ", "))
	}
	return priors, nil
}

// checkPrior reports why the saved run prior cannot be resumed as table t (same name,
// cells, size, seed and --data), or nil.
func checkPrior(prior, t *Table) error {
	if err := sameCells(prior, t); err != nil {
		return err
	}
	for _, k := range []string{"size", "seed", "data"} {
		a, _ := json.Marshal(prior.Settings[k])
		b, _ := json.Marshal(t.Settings[k])
		if !bytes.Equal(a, b) {
			return fmt.Errorf("its %s is %s, this run's %s", k, a, b)
		}
	}
	return nil
}

// renderSaved writes the tables of the saved JSON run in file (a sequence of table
// objects, as --format json writes them) in format, only table name when it is not "".
func renderSaved(file, name, format string, w io.Writer) error {
	if name != "" {
		if _, err := selectTables(name); err != nil {
			return err
		}
	}
	var all []*Table
	for _, file := range strings.Split(file, ",") {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		ts, err := ReadTables(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--from %s: %w", file, err)
		}
		all = append(all, ts...)
	}
	ts, err := mergeTables(all)
	if err != nil {
		return fmt.Errorf("--from %s: %w", file, err)
	}
	n := 0
	for _, t := range ts {
		if name != "" && name != "all" && t.Name != name {
			continue
		}
		n++
		if err := Write(w, t, format); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("--from %s: no table %q in it", file, name)
	}
	return nil
}

// computed reports whether a cell was computed by its run (not left "not computed" or
// "not run" for a data set the run did not cover).
func (c *Cell) computed() bool {
	return c.Note != "not computed" && !strings.HasPrefix(c.Note, "not run")
}

// isSummary reports whether row is a summary row derived from the other rows.
func isSummary(row string) bool {
	return row == summaryMeanRank || row == summaryMeanRatio || row == summaryWorstRatio
}

// mergeTables merges the tables of the same name (runs of disjoint data sets, --data)
// into one, in the order names first appear: each cell comes from the run that computed
// it, seconds add up, the summary rows are derived again from the merged cells, and the
// matches are counted again. A cell computed by two runs is an error.
func mergeTables(ts []*Table) ([]*Table, error) {
	var out []*Table
	byName := map[string]*Table{}
	for _, t := range ts {
		m, ok := byName[t.Name]
		if !ok {
			byName[t.Name] = t
			out = append(out, t)
			continue
		}
		if err := sameCells(m, t); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		for i := range t.Cells {
			c, into := &t.Cells[i], &m.Cells[i]
			if isSummary(c.Row) || !c.computed() {
				continue
			}
			if into.computed() {
				return nil, fmt.Errorf("table %s: cell (%s, %s) computed by two runs", t.Name, c.Row, c.Column)
			}
			*into = *c
		}
		m.Seconds += t.Seconds
		parts, _ := m.Settings["merged"].([]any)
		if parts == nil {
			parts = []any{partOf(m)}
			delete(m.Settings, "data")
			delete(m.Settings, "interrupted")
		}
		m.Settings["merged"] = append(parts, partOf(t))
	}
	for _, t := range out {
		if _, ok := t.Settings["merged"]; !ok {
			continue
		}
		switch t.Name {
		case "coverage":
			resetSummary(t)
			setSummary(t, tableRows(datasetsMNISTFirst), selectors, true, true)
		case "d3-merged":
			resetSummary(t)
			setSummary(t, tableRows(datasetsMNISTFirst), inits, false, false)
		}
		t.Matched = 0
		for _, c := range t.Cells {
			if c.Match {
				t.Matched++
			}
		}
	}
	return out, nil
}

// sameCells reports how runs a and b of a table differ in their cells' (row, column)
// order, or nil when they hold the same cells in the same order.
func sameCells(a, b *Table) error {
	if len(a.Cells) != len(b.Cells) {
		return fmt.Errorf("runs with %d and %d cells", len(a.Cells), len(b.Cells))
	}
	for i, c := range b.Cells {
		if into := a.Cells[i]; c.Row != into.Row || c.Column != into.Column {
			return fmt.Errorf("cell %d is (%s, %s) in one run and (%s, %s) in another", i, into.Row, into.Column, c.Row, c.Column)
		}
	}
	return nil
}

// partOf describes a merged run: its --data and, when it was interrupted, why.
func partOf(t *Table) map[string]any {
	p := map[string]any{"data": t.Settings["data"], "seconds": t.Seconds}
	if why, ok := t.Settings["interrupted"]; ok {
		p["interrupted"] = why
	}
	return p
}

// resetSummary clears the summary cells of t before they are derived again.
func resetSummary(t *Table) {
	for i := range t.Cells {
		if c := &t.Cells[i]; isSummary(c.Row) {
			c.Cairn, c.Noise, c.Match, c.Tolerance, c.Note = nil, nil, false, 0, "not computed"
		}
	}
}

// Write writes t in format: json (one indented object and a newline, as every cairnctl
// command writes its output) or markdown (WriteMarkdown).
func Write(w io.Writer, t *Table, format string) error {
	if format == "markdown" {
		return WriteMarkdown(w, t)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

// ReadTables decodes a sequence of table objects and restores what JSON does not
// carry: the run's size (for the quick/full heading) and which cells are pass/fail. A
// table that is not one of Names or a cell without row and column is an error.
func ReadTables(r io.Reader) ([]*Table, error) {
	dec := json.NewDecoder(r)
	var out []*Table
	for {
		var t Table
		err := dec.Decode(&t)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("table %d: %w", len(out)+1, err)
		}
		if !slices.Contains(Names(), t.Name) {
			return nil, fmt.Errorf("table %d: unknown name %q", len(out)+1, t.Name)
		}
		if raw, ok := t.Settings["size"]; ok {
			b, err := json.Marshal(raw)
			var sz Size
			if err == nil {
				err = json.Unmarshal(b, &sz)
			}
			if err != nil {
				return nil, fmt.Errorf("table %s: settings.size: %w", t.Name, err)
			}
			t.Settings["size"] = sz
		}
		for i := range t.Cells {
			c := &t.Cells[i]
			if c.Row == "" || c.Column == "" {
				return nil, fmt.Errorf("table %s: cell %d has no row or column", t.Name, i)
			}
			c.passFail = c.Paper == "pass" || c.Paper == "fail"
		}
		out = append(out, &t)
	}
	if len(out) == 0 {
		return nil, errors.New("no tables")
	}
	return out, nil
}

// selectTables checks --table and returns the tables it names.
func selectTables(table string) ([]string, error) {
	switch {
	case table == "all":
		return Names(), nil
	case slices.Contains(Names(), table):
		return []string{table}, nil
	case table == "":
		return nil, fmt.Errorf("--table is required: one of %s, or all", strings.Join(Names(), ", "))
	}
	return nil, fmt.Errorf("--table: unknown table %q, want one of %s, or all", table, strings.Join(Names(), ", "))
}

// Size is the size of a run. Full follows the paper where it states a setting
// (tab:hparams, Sec. 4 Setup); quick shrinks the data and the budgets.
type Size struct {
	Quick bool           `json:"quick"`
	N     map[string]int `json:"n"`      // training rows loaded per data set (0: all)
	M     map[string]int `json:"m"`      // landmarks per view (pool M = 2m)
	TestN map[string]int `json:"test_n"` // test rows
	H     int            `json:"h"`
	S     int            `json:"s"`
	K     int            `json:"k"`
	// Epochs of Adam (patience is the fit package's default).
	Epochs int `json:"epochs"`
	// SRHTDraws and TwoAxisDraws are the draws of verify srht and verify two-axis.
	SRHTDraws    int `json:"srht_draws"`
	TwoAxisDraws int `json:"two_axis_draws"`
	// Seeds are the Adam fits of cairn-vs-krepes; Random the random deletion sets.
	Seeds  int `json:"seeds"`
	Random int `json:"random"`
}

// fullSize is the paper's size of every table (tab:hparams).
func fullSize() Size {
	return Size{
		N:     map[string]int{"mnist": 0, "adult": 0},
		M:     map[string]int{"mnist": 256, "adult": 1000},
		TestN: map[string]int{"mnist": 10000, "adult": 16281},
		H:     4, S: 4096, K: 256, Epochs: 20, SRHTDraws: 20000, TwoAxisDraws: 96, Seeds: 3, Random: 30,
	}
}

// quickSize is the reduced size of table name: the tables of 30 and more fits
// (coverage, d3-merged) and cairn-vs-krepes (whose KREPES solves take most of its
// time) load 1,500 training rows, the two tables of six single fits 5,000, so each stays
// within about three minutes on two cores.
func quickSize(name string) Size {
	n := 1500
	if name == "table1-all" || name == "deletion" {
		n = 5000
	}
	return Size{
		Quick: true,
		N:     map[string]int{"mnist": n, "adult": n},
		M:     map[string]int{"mnist": 64, "adult": 64},
		TestN: map[string]int{"mnist": 2000, "adult": 2000},
		H:     2, S: 256, K: 256, Epochs: 20, SRHTDraws: 4000, TwoAxisDraws: 96, Seeds: 3, Random: 30,
	}
}

// runner is what a table runner reads: the size, the data, the seed, and where to
// report progress.
type runner struct {
	size     Size
	adultDir string
	seed     uint64
	progress io.Writer
	// cache keeps one data set's featurized training rows between the fits of a run.
	cache *offline.BlockCache
	// only, when not "", is the one data set (flag name) whose rows run (--data).
	only string
	// prior is the interrupted run being continued (--resume), or nil; kept counts the
	// cells copied from it.
	prior *Table
	kept  int
	// audit is cairnctl audit's table (Command.Audit), or nil.
	audit Auditor
}

// keep copies from the resumed run (prior) into t the non-summary cells that match
// selects, when that run computed every one of them, and reports whether it did: the
// caller then skips the work that computes them. Nothing is copied when one of them
// was not computed (an interrupted row is computed again whole), or without a prior.
func (r *runner) keep(t *Table, what string, selects func(c *Cell) bool) bool {
	if r.prior == nil {
		return false
	}
	var idx []int
	for i := range t.Cells {
		c := &r.prior.Cells[i]
		if isSummary(c.Row) || !selects(c) {
			continue
		}
		if !c.computed() {
			return false
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return false
	}
	for _, i := range idx {
		t.Cells[i] = r.prior.Cells[i]
	}
	r.kept += len(idx)
	r.logf("%s: %d cell(s) kept from --resume", what, len(idx))
	return true
}

// keepRow is keep for every cell of row.
func (r *runner) keepRow(t *Table, row string) bool {
	return r.keep(t, row, func(c *Cell) bool { return c.Row == row })
}

// keepCell is keep for cell (row, col).
func (r *runner) keepCell(t *Table, row, col string) bool {
	return r.keep(t, row+" "+col, func(c *Cell) bool { return c.Row == row && c.Column == col })
}

// dataSpec returns the --data value of a data set flag name ("mnist", "adult"), or ""
// when the data set is not run (Adult without --adult, or not the one --data names).
func (r *runner) dataSpec(name string) string {
	if r.only != "" && r.only != name {
		return ""
	}
	if name == "adult" {
		if r.adultDir == "" {
			return ""
		}
		return "adult:" + r.adultDir
	}
	return name
}

// notRun is the note of a row whose data set dataSpec leaves out.
func (r *runner) notRun(name string) string {
	if r.only != "" && r.only != name {
		return "not run: --data " + r.only
	}
	return "not run: give --adult DIR"
}

// pipeline returns the pipeline flags of a data set at the run's size, with the shipped
// trained weights (offline.Pipeline's default), normalize false and tolerance 0: the paper's
// pc-ntk takes the exact argmax of the raw residuals, whatever the daemon's
// pool.normalize and pool.tolerance.
func (r *runner) pipeline(name string) offline.Pipeline {
	return offline.Pipeline{Data: r.dataSpec(name), H: r.size.H, S: r.size.S, M: r.size.M[name], N: r.size.N[name], Seed: r.seed, Normalize: false, Tolerance: 0}
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, "reproduce: "+format+"\n", args...)
}

// Cell is one cell of a reproduced table.
type Cell struct {
	Row    string `json:"row"`
	Column string `json:"column"`
	// Paper is the paper's number as printed; PaperRange the value or range it states.
	Paper      string     `json:"paper"`
	PaperRange [2]float64 `json:"paper_range"`
	Source     string     `json:"source"`
	// Cairn is cairn's value (null: not computed, see Note); Noise its standard error or
	// seed standard deviation where one is measured.
	Cairn *float64 `json:"cairn"`
	Noise *float64 `json:"noise,omitempty"`
	// Tolerance is the allowance Match used: |cairn − paper range| ≤ tolerance.
	Tolerance float64 `json:"tolerance"`
	Match     bool    `json:"match"`
	Note      string  `json:"note,omitempty"`
	passFail  bool
}

// Table is the JSON object of one table.
type Table struct {
	Name     string         `json:"name"`
	Label    string         `json:"label"`
	Settings map[string]any `json:"settings"`
	Seconds  float64        `json:"seconds"`
	Matched  int            `json:"matched"`
	Cells    []Cell         `json:"cells"`
}

// cell returns the table's cell (row, column); it panics when the paper has no such cell
// (a runner filling a cell the paper table lacks is a programming error).
func (t *Table) cell(row, col string) *Cell {
	for i := range t.Cells {
		if t.Cells[i].Row == row && t.Cells[i].Column == col {
			return &t.Cells[i]
		}
	}
	panic(fmt.Sprintf("reproduce: table %s has no paper cell (%q, %q)", t.Name, row, col))
}

// set records cairn's value v of cell (row, col) with its noise (NaN: none measured)
// and matches it against the paper: within the paper's range widened by
// max(tol, 2·noise, half a unit of the paper's last digit). A NaN or infinite v is recorded as null and does not match.
func (t *Table) set(row, col string, v, noise, tol float64, note string) {
	c := t.cell(row, col)
	c.Note = note
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.Cairn, c.Match = nil, false
		return
	}
	c.Cairn = &v
	if !c.passFail {
		// The paper's rounding: half a unit of its last printed digit.
		tol = math.Max(tol, 0.5*math.Pow(10, -float64(decimals(c.Paper))))
	}
	if !math.IsNaN(noise) && !math.IsInf(noise, 0) {
		c.Noise = &noise
		tol = math.Max(tol, 2*noise)
	}
	c.Tolerance = tol
	c.Match = v >= c.PaperRange[0]-tol && v <= c.PaperRange[1]+tol
}

// skip marks every cell of row as not run, with the reason.
func (t *Table) skip(row, why string) {
	for i := range t.Cells {
		if t.Cells[i].Row == row {
			t.Cells[i].Note = why
		}
	}
}

// runTable runs one table at size and returns it with its cells.
//
// prior, when not nil, is a saved run of the table to continue (--resume): a completed
// one is returned whole; an interrupted one's computed cells are copied in and the
// runner skips their work (runner.keep), so only the rest is computed.
func runTable(ctx context.Context, name string, size Size, adultDir string, seed uint64, progress io.Writer, only string, prior *Table, audit Auditor) (*Table, error) {
	specs := tables()
	i := slices.IndexFunc(specs, func(t spec) bool { return t.name == name })
	if i < 0 {
		return nil, fmt.Errorf("unknown table %q, want one of %s", name, strings.Join(Names(), ", "))
	}
	pcs, ok := paperTables[name]
	if !ok || len(pcs) == 0 {
		return nil, fmt.Errorf("table %s: not implemented yet (no paper numbers transcribed)", name)
	}
	t := &Table{Name: name, Label: specs[i].label, Settings: map[string]any{
		"size": size, "seed": seed, "weights": "shipped trained (entk/weights) for mnist and adult",
	}}
	for _, p := range pcs {
		c := Cell{Row: p.Row, Column: p.Column, Paper: p.Text, PaperRange: [2]float64{p.Lo, p.Hi}, Source: p.Label,
			Note: "not computed"}
		c.passFail = p.Text == "pass" || p.Text == "fail"
		t.Cells = append(t.Cells, c)
	}
	if adultDir == "" {
		t.Settings["adult"] = "not given (--adult): Adult rows not run"
	} else {
		t.Settings["adult"] = adultDir
	}
	if only != "" {
		t.Settings["data"] = only
	}
	r := &runner{size: size, adultDir: adultDir, seed: seed, progress: progress, cache: &offline.BlockCache{}, only: only, prior: prior, audit: audit}
	if r.progress == nil {
		r.progress = io.Discard
	}
	if prior != nil {
		if err := checkPrior(prior, t); err != nil {
			return nil, fmt.Errorf("--resume: table %s: %w", name, err)
		}
		if _, ok := prior.Settings["interrupted"]; !ok {
			r.logf("%s: kept whole from --resume (that run completed it)", name)
			return prior, nil
		}
		// Seconds add up over the runs; the settings say what was kept.
		t.Settings["resumed"] = map[string]any{"seconds": prior.Seconds, "interrupted": prior.Settings["interrupted"]}
	}
	t0 := time.Now()
	err := specs[i].run(ctx, r, t)
	t.Seconds = time.Since(t0).Seconds()
	if prior != nil {
		t.Seconds += prior.Seconds
		t.Settings["resumed"].(map[string]any)["kept_cells"] = r.kept
	}
	for _, c := range t.Cells {
		if c.Match {
			t.Matched++
		}
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted (SIGINT, SIGTERM): the cells computed so far are returned with the
		// error, for the caller to keep; the rest still read "not computed".
		t.Settings["interrupted"] = err.Error()
		return t, err
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// WriteMarkdown writes t as a Markdown heading, its settings line and a grid of its
// cells: rows and columns in the paper's order, each cell "paper / cairn", cairn's
// noise after ±, and ✓ or ✗ for the match.
func WriteMarkdown(w io.Writer, t *Table) error {
	var rows, cols []string
	for _, c := range t.Cells {
		if !slices.Contains(rows, c.Row) {
			rows = append(rows, c.Row)
		}
		if !slices.Contains(cols, c.Column) {
			cols = append(cols, c.Column)
		}
	}
	var b strings.Builder
	mode := "full"
	if sz, ok := t.Settings["size"].(Size); ok && sz.Quick {
		mode = "quick"
	}
	mode += " run"
	if _, ok := t.Settings["resumed"]; ok {
		mode += ", resumed from an interrupted run (--resume)"
	}
	if _, ok := t.Settings["interrupted"]; ok {
		mode += " (interrupted: cells not reached read \"not computed\")"
	}
	fmt.Fprintf(&b, "### %s (%s)\n\n", t.Name, t.Label)
	fmt.Fprintf(&b, "%s, %.0f s; %d of %d cells match. Each cell: paper / cairn.\n\n", mode, t.Seconds, t.Matched, len(t.Cells))
	b.WriteString("| |")
	for _, c := range cols {
		b.WriteString(" " + mdEscape(c) + " |")
	}
	b.WriteString("\n| --- |")
	for range cols {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	var notes []string
	for _, r := range rows {
		b.WriteString("| " + mdEscape(r) + " |")
		for _, col := range cols {
			i := slices.IndexFunc(t.Cells, func(c Cell) bool { return c.Row == r && c.Column == col })
			if i < 0 {
				b.WriteString(" |")
				continue
			}
			c := t.Cells[i]
			b.WriteString(" " + mdEscape(c.Paper) + " / " + mdEscape(formatCairn(c)) + " |")
			if c.Note != "" && !slices.Contains(notes, c.Note) {
				notes = append(notes, c.Note)
			}
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("* " + n + "\n")
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// formatCairn renders cairn's value of c with as many decimals as the paper prints
// (pass/fail for a pass-or-fail cell), its noise, and ✓/✗.
func formatCairn(c Cell) string {
	mark := " ✗"
	if c.Match {
		mark = " ✓"
	}
	if c.Cairn == nil {
		if c.Match {
			return "—" + mark // matched without a number: see the cell's note
		}
		return "—"
	}
	if c.passFail {
		if *c.Cairn == passValue {
			return "pass" + mark
		}
		return "fail" + mark
	}
	d := decimals(c.Paper)
	s := strconv.FormatFloat(*c.Cairn, 'f', d, 64)
	if c.Noise != nil {
		s += " ± " + strconv.FormatFloat(*c.Noise, 'f', max(d, 2), 64)
	}
	return s + mark
}

// decimals returns the decimals of the first number in s ("84.10 ± 0.01" → 2), at least
// 2 for numbers printed as integers below 10 (ratios such as "up to 2.5" keep theirs).
func decimals(s string) int {
	start := strings.IndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
	if start < 0 {
		return 2
	}
	end := start
	for end < len(s) && (s[end] == '.' || (s[end] >= '0' && s[end] <= '9')) {
		end++
	}
	num := s[start:end]
	if i := strings.IndexByte(num, '.'); i >= 0 {
		return len(num) - i - 1
	}
	return 0
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// atof parses a transcribed paper number; a malformed one is a programming error.
func atof(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Sprintf("reproduce: paper number %q: %v", s, err))
	}
	return v
}
