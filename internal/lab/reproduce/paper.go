package reproduce

import "github.com/cairnhq/cairn/internal/lab/verify"

// The paper's numbers, transcribed from the paper's LaTeX source (the CAIRN paper,
// "Certified Approximation for Interpretable Representer Landmarks", ICLR 2027 submission).
// These are the only constants of cairnctl reproduce: every number cairn reports is
// computed when the table runs.
// Each table's cells are listed in the paper's row and column order; a table's runner
// fills cairn's value of exactly these cells, so a cell the paper has and cairn lacks
// shows as cairn null with a note, never as a made-up number.

// paperCell is one number of the paper: Text as the paper prints it, [Lo, Hi] the value
// or range it states (Lo == Hi for a point), in the unit cairn's value is reported in.
type paperCell struct {
	Row, Column string
	Text        string
	Lo, Hi      float64
	// Label is the paper's table, figure or section the number comes from.
	Label string
}

func pt(row, col, text string, v float64, label string) paperCell {
	return paperCell{Row: row, Column: col, Text: text, Lo: v, Hi: v, Label: label}
}

func rg(row, col, text string, lo, hi float64, label string) paperCell {
	return paperCell{Row: row, Column: col, Text: text, Lo: lo, Hi: hi, Label: label}
}

// pass and fail are the values of a pass-or-fail cell.
const (
	passValue = 1
	failValue = 0
)

// item is a data set, loss, selector or initializer: the name the paper's tables
// use for it and cairnctl's flag value.
type item struct{ name, flag string }

// The data sets, losses, selectors and initializers in the paper's order, with the
// names the paper's tables use for them and cairnctl's flag values.
var (
	datasets = []item{{"Adult", "adult"}, {"MNIST", "mnist"}}
	// datasetsMNISTFirst is the order of the paper's coverage and initializer tables.
	datasetsMNISTFirst = []item{{"MNIST", "mnist"}, {"Adult", "adult"}}
	losses             = []item{{"BT", "bt"}, {"SimCLR", "simclr"}, {"VICReg", "vicreg"}}
	selectors          = []item{
		{"Random", "random"}, {"k-means++", "kmeans++"}, {"DPP", "dpp"}, {"k-center", "kcenter"}, {"PC-NTK", "pc-ntk"}, {"PC", "pc"},
	}
	inits = []item{
		{"Kaiming", "kaiming"}, {"PCI-D", "pci"}, {"PCI-L", "pci-lanczos"}, {"CSI", "csi"}, {"AUI", "aui"},
	}
)

// paperTables holds every table's paper cells, keyed by the reproduce table name.
var paperTables = map[string][]paperCell{
	// Sec. 2 after Thm. srht-exact and fig:theory(a): measured/predicted within
	// 0.96–1.03 (P = 256, s = 32); the JL rate over-predicts by up to 2.5×. The paper
	// states one range for all its inputs; each of cairn's inputs is held to it.
	"srht": func() []paperCell {
		var cs []paperCell
		for _, n := range verify.SRHTCaseNames {
			cs = append(cs, rg(n, "measured/predicted", "0.96–1.03", 0.96, 1.03, "fig:theory(a), Thm. srht-exact"))
		}
		return append(cs, pt("max over inputs", "JL predicted/measured", "up to 2.5", 2.5, "fig:theory(a), Sec. 2"))
	}(),
	// App. verify, fig:2b: unsketched cells (s = ∞) measured/predicted 1.03, 1.07, 0.99
	// for h = 1, 4, 16; the measured excess of the relative variance over the output term
	// at s = 20 is 0.273, 0.064, 0.027; r_tr(M̄) = 7.9 on the paper's eNTK block.
	"two-axis": {
		pt("h=1, s=∞", "measured/predicted", "1.03", 1.03, "fig:2b(b)"),
		pt("h=4, s=∞", "measured/predicted", "1.07", 1.07, "fig:2b(b)"),
		pt("h=16, s=∞", "measured/predicted", "0.99", 0.99, "fig:2b(b)"),
		pt("h=1, s=20", "relative excess over output term", "0.273", 0.273, "app. 2b text"),
		pt("h=4, s=20", "relative excess over output term", "0.064", 0.064, "app. 2b text"),
		pt("h=16, s=20", "relative excess over output term", "0.027", 0.027, "app. 2b text"),
		pt("pair", "r_tr(M̄)", "7.9", 7.9, "fig:2b caption"),
	},
	// App. additional, "Effective dimension by quadrature": SLQ within 0.72% of the exact
	// d_eff in all 12 (data set, selector) cells (relative error in %). The paper does not
	// state those cells' ridge; Sec. 4 gives the 0.72% next to λ = 10. Cairn checks the
	// claim at both the fit's ridge (rows "Adult", "MNIST") and λ = 10 (rows "…, λ = 10").
	"deff": func() []paperCell {
		var cs []paperCell
		for _, d := range datasets {
			for _, row := range []string{d.name, deffPaperRow(d.name)} {
				for _, s := range selectors {
					cs = append(cs, rg(row, s.name, "≤ 0.72", 0, 0.72, "app. additional (SLQ d_eff), Sec. 4"))
				}
			}
		}
		return cs
	}(),
	// tab:kappa-matched: κ_C by selector (PCI-Lanczos initializer, fig:acc-del(a)).
	"coverage": kappaCells(map[string][6]float64{
		"MNIST BT": {130, 67, 96, 93, 55, 67}, "MNIST SimCLR": {131, 50, 31, 46, 59, 37}, "MNIST VICReg": {55, 78, 68, 42, 53, 65},
		"Adult BT": {5, 17, 2, 15, 8, 3}, "Adult SimCLR": {9, 15, 5, 5, 7, 2}, "Adult VICReg": {3, 2, 2, 2, 2, 2},
	}),
	// tab:d3-merged: accuracy (%) by initializer (k-means++ landmarks, fig:acc-del(a)).
	"d3-merged": initCells(map[string][5]string{
		"MNIST BT": {"90.64", "87.15", "87.03", "90.29", "90.98"}, "MNIST SimCLR": {"93.30", "96.15", "96.24", "97.38", "97.33"},
		"MNIST VICReg": {"93.23", "90.30", "90.21", "93.04", "93.06"},
		"Adult BT":     {"81.59", "81.01", "80.95", "81.77", "81.66"}, "Adult SimCLR": {"81.98", "81.29", "81.34", "81.91", "81.86"},
		"Adult VICReg": {"81.43", "80.72", "80.85", "80.87", "80.38"},
	}),
	// tab:cairn-vs-krepes: k-NN accuracy (%), Δ (points), speed-up (×), identifiability
	// (best of three ranking percentiles against 30 random deletions, %).
	"cairn-vs-krepes": krepesCells([]krepesRow{
		{"Adult BT", "84.10 ± 0.01", 84.10, "84.01", 84.01, "+0.09", 0.09, "10.5×", 10.5, 83, 73},
		{"Adult SimCLR", "84.08", 84.08, "84.35", 84.35, "-0.27", -0.27, "3.8×", 3.8, 97, 93},
		{"Adult VICReg", "84.02", 84.02, "84.33", 84.33, "-0.31", -0.31, "11.3×", 11.3, 83, 57},
		{"MNIST BT", "96.30", 96.30, "96.31", 96.31, "-0.01", -0.01, "5.7×", 5.7, 100, 100},
		{"MNIST SimCLR", "96.10 ± 0.03", 96.10, "94.49", 94.49, "+1.61", 1.61, "3.3×", 3.3, 100, 100},
		{"MNIST VICReg", "96.13 ± 0.02", 96.13, "92.99", 92.99, "+3.14", 3.14, "2.5×", 2.5, 100, 73},
	}),
	// tab:table1-all: Kaiming initializer, k-means++ landmarks.
	"table1-all": func() []paperCell {
		rows := []struct {
			row, acc string
			a        float64
			kappa    float64
			seen     float64
		}{
			{"Adult BT", "81.59", 81.59, 9, 2}, {"Adult SimCLR", "81.98", 81.98, 2, 2}, {"Adult VICReg", "81.43", 81.43, 21, 2},
			{"MNIST BT", "90.64", 90.64, 91, 10}, {"MNIST SimCLR", "93.30", 93.30, 73, 10}, {"MNIST VICReg", "93.23", 93.23, 41, 10},
		}
		var cs []paperCell
		for _, r := range rows {
			seen := "2/2"
			if r.seen == 10 {
				seen = "10/10"
			}
			cs = append(cs,
				pt(r.row, "Acc (%)", r.acc, r.a, "tab:table1-all"),
				pt(r.row, "κ_C", ftoa(r.kappa), r.kappa, "tab:table1-all"),
				pt(r.row, "classes seen", seen, r.seen, "tab:table1-all"))
		}
		return cs
	}(),
	// fig:acc-del(b) and Sec. 4 "Deletion of influential landmarks": the top-10 by ω pass
	// (their deletion lowers 50-NN confidence more than all 20 random deletions) on Adult
	// SimCLR and VICReg only; Latent-Space Reselection passes in no cell.
	"deletion": func() []paperCell {
		var cs []paperCell
		for _, d := range []string{"Adult", "MNIST"} {
			for _, l := range losses {
				row := d + " " + l.name
				omega := paperCell{Row: row, Column: "top-10 by ω", Text: "fail", Label: "fig:acc-del(b), Sec. 4"}
				if d == "Adult" && l.name != "BT" {
					omega.Text, omega.Lo, omega.Hi = "pass", passValue, passValue
				}
				cs = append(cs, omega, paperCell{Row: row, Column: "Latent-Space Reselection", Text: "fail", Label: "fig:acc-del(b), Sec. 4"})
			}
		}
		return cs
	}(),
}

func kappaCells(v map[string][6]float64) []paperCell {
	var cs []paperCell
	for _, d := range []string{"MNIST", "Adult"} {
		for _, l := range losses {
			row := d + " " + l.name
			for i, s := range selectors {
				cs = append(cs, pt(row, s.name, ftoa(v[row][i]), v[row][i], "tab:kappa-matched"))
			}
		}
	}
	// The summary rows, derived in the paper from the cells above (summaryOf).
	for _, r := range []struct {
		row string
		v   [6]string
	}{
		{summaryMeanRank, [6]string{"4.83", "4.58", "2.92", "3.08", "3.17", "2.42"}},
		{summaryMeanRatio, [6]string{"2.73", "3.61", "1.39", "2.53", "2.11", "1.24"}},
		{summaryWorstRatio, [6]string{"4.50", "8.50", "2.50", "7.50", "4.00", "1.55"}},
	} {
		for i, s := range selectors {
			cs = append(cs, pt(r.row, s.name, r.v[i], atof(r.v[i]), "tab:kappa-matched"))
		}
	}
	return cs
}

func initCells(v map[string][5]string) []paperCell {
	var cs []paperCell
	for _, d := range []string{"MNIST", "Adult"} {
		for _, l := range losses {
			row := d + " " + l.name
			for i, in := range inits {
				cs = append(cs, pt(row, in.name, v[row][i], atof(v[row][i]), "tab:d3-merged"))
			}
		}
	}
	for i, in := range inits {
		r := [5]string{"2.17", "4.17", "4.17", "2.00", "2.50"}[i]
		cs = append(cs, pt(summaryMeanRank, in.name, r, atof(r), "tab:d3-merged"))
	}
	return cs
}

type krepesRow struct {
	row                  string
	cairnText            string
	cairn                float64
	krepesText           string
	krepes               float64
	deltaText            string
	delta                float64
	speedText            string
	speed                float64
	identCairn, identKre float64
}

func krepesCells(rows []krepesRow) []paperCell {
	const l = "tab:cairn-vs-krepes"
	var cs []paperCell
	for _, r := range rows {
		cs = append(cs,
			pt(r.row, "CAIRN acc (%)", r.cairnText, r.cairn, l),
			pt(r.row, "KREPES acc (%)", r.krepesText, r.krepes, l),
			pt(r.row, "Δ (points)", r.deltaText, r.delta, l),
			pt(r.row, "speed-up", r.speedText, r.speed, l),
			pt(r.row, "identifiability CAIRN", ftoa(r.identCairn), r.identCairn, l),
			pt(r.row, "identifiability KREPES", ftoa(r.identKre), r.identKre, l))
	}
	return cs
}
