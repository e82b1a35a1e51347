package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestValidateFlags: every invalid flag is named, all of them in one error, before any
// data is loaded (the data set named here does not exist); flags a study cannot take
// (weights it did not train) are refused.
func TestValidateFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{}, []string{"--data is required"}},
		{[]string{"--data", "nope", "--n", "4", "--queries", "0", "--halves", "1", "--train-epochs", "0", "--train-batch", "0", "--train-lr", "-1",
			"--random", "0", "--trak-ridge", "0", "--val-frac", "1", "--format", "csv", "--m", "0", "--retrains", "0", "--tolerance", "1"},
			[]string{"--tolerance: 1", "--retrains 0", "--n 4", "--queries 0", "--halves 1", "--train-epochs 0", "--train-batch 0", "--train-lr -1", "--random 0", "--trak-ridge 0", "--val-frac 1", "--format \"csv\"", "--m 0"}},
		{[]string{"--data", "nope", "--weights", "w.safetensors"}, []string{"--weights \"w.safetensors\""}},
		{[]string{"--data", "nope", "--untrained"}, []string{"--untrained=true"}},
		{[]string{"--data", "nope", "--train-lr", "+Inf"}, []string{"--train-lr +Inf"}},
		{[]string{"--data", "nope", "--retrain-deletion-k", "0", "--retrain-deletion-random", "0", "--retrain-deletion-rankings", "gradient,nope"},
			[]string{"--retrain-deletion-k 0", "--retrain-deletion-random 0", `--retrain-deletion-rankings: "nope"`}},
		{[]string{"--data", "nope", "--retrain-deletion-queries", "-1"}, []string{"--retrain-deletion-queries -1"}},
		{[]string{"--data", "nope", "--retrain-deletion-retrains", "0"}, []string{"--retrain-deletion-retrains 0"}},
		{[]string{"--from", "x.json", "--format", "csv"}, []string{"--format \"csv\""}},
	} {
		code, out, errs := runCmd(append([]string{"validate"}, c.args...)...)
		if code != 1 || out != "" {
			t.Errorf("validate %v: exit %d, stdout %q; want 1 and nothing", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("validate %v: error %q does not name %q", c.args, errs, w)
			}
		}
	}
}

// TestValidateSmall runs the whole study at a tiny size (120 MNIST points, 4 halves of two
// networks each, one training epoch, 6 queries, 16 landmarks per view so that the pool
// holds the 10 points of the top-10 deletion test): the report has every ranking and baseline with the
// documented keys, every number finite (an LDS and a percentile within their ranges), the
// top-K of every ranking is what the served model's AnswerRanked certifies, and the
// saved JSON prints back as a Markdown table with a row per ranking.
func TestValidateSmall(t *testing.T) {
	args := []string{"validate", "--data", "mnist", "--n", "120", "--queries", "6", "--halves", "4", "--m", "16", "--h", "1", "--s", "64",
		"--dim", "16", "--epochs", "2", "--train-epochs", "1", "--retrains", "2", "--seed", "1", "--retrain-deletion-queries", "3", "--retrain-deletion-random", "4", "--retrain-deletion-retrains", "2"}
	code, out, errs := runCmd(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Rankings  map[string]map[string]any `json:"rankings"`
		Baselines map[string]map[string]any `json:"baselines"`
		Signed    map[string]map[string]any `json:"signed"`
		Settings  map[string]any            `json:"settings"`
		Seconds   map[string]float64        `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	check := func(group string, rows map[string]map[string]any, names ...string) {
		if len(rows) != len(names) {
			t.Errorf("%s: %d rows, want %v", group, len(rows), names)
		}
		for _, name := range names {
			row := rows[name]
			for _, k := range []string{"lds", "lds_se", "lds_encoder", "lds_encoder_se", "deletion_percentile", "deletion_percentile_top10",
				"deletion_percentile_midrank", "deletion_percentile_top10_midrank"} {
				v, ok := row[k].(float64)
				if !ok || math.IsNaN(v) {
					t.Errorf("%s %s: %s = %v, want a number", group, name, k, row[k])
					continue
				}
				lo, hi := -1.0, 1.0
				if strings.HasPrefix(k, "deletion") {
					lo = 0
				}
				if strings.HasSuffix(k, "_se") {
					lo, hi = 0, 2
				}
				if v < lo || v > hi {
					t.Errorf("%s %s: %s = %v outside [%v, %v]", group, name, k, v, lo, hi)
				}
			}
			if row["lds_queries"] != 6.0 || row["lds_encoder_queries"] != 6.0 {
				t.Errorf("%s %s: %v, %v queries, want 6", group, name, row["lds_queries"], row["lds_encoder_queries"])
			}
		}
	}
	check("rankings", rep.Rankings, "gradient", "gradient_cosine", "displacement", "representer", "entk", "entk_cosine", "graddot", "graddot_all",
		"graddot_all_cosine", "graddot_all_if", "graddot_all_if_damped", "label_ntk", "label_ntk_all")
	// The served gradient rankings are graddot_all's and graddot_all_cosine's scores, so
	// every statistic is the same.
	for served, row := range map[string]string{"gradient": "graddot_all", "gradient_cosine": "graddot_all_cosine"} {
		for k, v := range rep.Rankings[row] {
			if strings.HasPrefix(k, "deletion_retrain") {
				continue // run by name: gradient is in --retrain-deletion-rankings, graddot_all not
			}
			if rep.Rankings[served][k] != v {
				t.Errorf("%s %s = %v, %s's %v: the served ranking is not the study row", served, k, rep.Rankings[served][k], row, v)
			}
		}
	}
	check("baselines", rep.Baselines, "random", "trak", "class")
	check("signed", rep.Signed, "displacement", "representer", "entk", "entk_cosine")
	// The deletion test against retraining runs for --retrain-deletion-rankings only
	// (gradient_cosine, gradient and trak by default): a percentile there, null elsewhere.
	for group, g := range map[string]map[string]map[string]any{"rankings": rep.Rankings, "baselines": rep.Baselines, "signed": rep.Signed} {
		for name, row := range g {
			v, ok := row["deletion_retrain_percentile"].(float64)
			m, okm := row["deletion_retrain_percentile_midrank"].(float64)
			ran := slices.Contains([]string{"rankings/gradient_cosine", "rankings/gradient", "baselines/trak"}, group+"/"+name)
			switch {
			case ran && (!ok || !okm || v < 0 || v > 1 || m < v || m > 1):
				t.Errorf("%s: deletion_retrain_percentile %v, midrank %v; want 0 ≤ strict ≤ midrank ≤ 1", name, row["deletion_retrain_percentile"], row["deletion_retrain_percentile_midrank"])
			case !ran && (row["deletion_retrain_percentile"] != nil || row["deletion_retrain_percentile_midrank"] != nil):
				t.Errorf("%s: deletion_retrain_percentile %v, not one of --retrain-deletion-rankings", name, row["deletion_retrain_percentile"])
			}
		}
	}
	if rd, _ := rep.Settings["retrain_deletion"].(map[string]any); rd["queries"] != 3.0 || rd["random"] != 4.0 || rd["k"] != 1.0 || rd["retrains"] != 2.0 {
		t.Errorf("settings retrain_deletion %v, want 3 queries, 4 random sets of 1, 2 networks each", rep.Settings["retrain_deletion"])
	}
	if n := rep.Seconds["retrain_deletion_networks"]; n < 2*5 || n > 2*(1+4+3*3) || int(n)%2 != 0 {
		t.Errorf("retraining deletion trained %v networks, want 2 for each of the base, 4 random and at most 3×3 top sets", n)
	}
	s := rep.Settings
	if s["n"] != 120.0 || s["retrains"] != 2.0 || s["halves"] != 4.0 || s["queries"] != 6.0 || s["half_size"] != 60.0 || s["kernel"] != "exact" {
		t.Errorf("settings do not echo the run: %v", s)
	}
	agree, _ := s["serving_top_agreement"].(map[string]any)
	for _, name := range []string{"gradient", "displacement", "representer", "entk"} {
		if agree[name] != 1.0 {
			t.Errorf("serving_top_agreement[%s] = %v: the ranking's top-K is not what serving.Model.AnswerRanked certifies", name, agree[name])
		}
	}
	if _, ok := agree["entk_cosine"]; ok {
		t.Errorf("serving_top_agreement has entk_cosine, which no answer serves: %v", agree)
	}
	for _, k := range []string{"train", "features", "fit", "scores", "trak", "retrain", "refit", "deletion", "total"} {
		if v, ok := rep.Seconds[k]; !ok || !(v >= 0) {
			t.Errorf("seconds[%q] = %v", k, v)
		}
	}

	file := filepath.Join(t.TempDir(), "validate.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, md, errs := runCmd("validate", "--from", file, "--format", "markdown")
	if code != 0 {
		t.Fatalf("--from: exit %d: %s", code, errs)
	}
	for _, row := range []string{"| gradient |", "| displacement |", "| representer |", "| entk |", "| random (baseline) |", "| trak (baseline) |", "| class (baseline) |", `| serving_top_agreement | {"displacement":1,"entk":1,"gradient":1,"gradient_cosine":1,"representer":1} |`} {
		if !strings.Contains(md, row) {
			t.Errorf("markdown lacks %q:\n%s", row, md)
		}
	}
}

// TestValidateAdultFactored: on Adult's ResMLP the exact rows of 128 landmarks exceed the
// default memory budget in full and the served model keeps them factored; the rankings
// are then scored on the same factored rows, so every ranking's top-K is still the one
// AnswerRanked certifies. It runs on the copy of Adult that dataset ships (spec adult).
func TestValidateAdultFactored(t *testing.T) {
	code, out, errs := runCmd("validate", "--data", "adult", "--n", "120", "--queries", "4", "--halves", "2", "--m", "64",
		"--h", "1", "--s", "64", "--dim", "8", "--epochs", "1", "--train-epochs", "1", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Settings map[string]any `json:"settings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Settings["kernel"] != "exact_factored" {
		t.Errorf("kernel %v, want exact_factored", rep.Settings["kernel"])
	}
	agree, _ := rep.Settings["serving_top_agreement"].(map[string]any)
	for _, name := range []string{"gradient", "displacement", "representer", "entk"} {
		if agree[name] != 1.0 {
			t.Errorf("serving_top_agreement[%s] = %v, want 1", name, agree[name])
		}
	}
}
