package validate

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestReportJSONAndMarkdown: the stats' keys are the report's, NaN is null, and the
// Markdown table has a row per ranking (known ones first, in Rankings order) and per
// baseline.
func TestReportJSONAndMarkdown(t *testing.T) {
	s := Stats{LDS: 0.25, LDSSE: 0.01, LDSQueries: 9, LDSEncoder: math.NaN(), LDSEncoderSE: math.NaN(), DeletionPercentile: 0.9, DeletionPercentileTop10: 1,
		DeletionPercentileMidrank: 0.95, DeletionPercentileTop10Midrank: math.NaN()}
	r := &Report{
		Rankings:  map[string]Stats{ENTK: s, Displacement: s, "zzz": s},
		Baselines: map[string]Stats{Random: s},
		Signed:    map[string]Stats{Representer: s},
		Settings:  map[string]any{"n": 10, "data": "a|b"},
		Seconds:   map[string]float64{"total": 1.25},
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	row := back["rankings"]["entk"].(map[string]any)
	for _, k := range []string{"lds", "lds_se", "lds_queries", "lds_encoder", "lds_encoder_se", "lds_encoder_queries", "deletion_percentile", "deletion_percentile_top10",
		"deletion_percentile_midrank", "deletion_percentile_top10_midrank"} {
		if _, ok := row[k]; !ok {
			t.Errorf("stats lack %q: %v", k, row)
		}
	}
	if row["lds_encoder"] != nil || row["lds"] != 0.25 {
		t.Errorf("stats %v: want lds 0.25 and lds_encoder null", row)
	}
	var again Report
	if err := json.Unmarshal(raw, &again); err != nil {
		t.Fatal(err)
	}
	if g := again.Rankings[ENTK]; g.LDS != s.LDS || g.LDSQueries != s.LDSQueries || !math.IsNaN(g.LDSEncoder) || g.DeletionPercentileTop10 != 1 {
		t.Errorf("read back: %+v, want %+v", g, s)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	iD, iE, iZ := strings.Index(out, "| displacement |"), strings.Index(out, "| entk |"), strings.Index(out, "| zzz |")
	if iD < 0 || iE < iD || iZ < iE || !strings.Contains(out, "| random (baseline) |") || !strings.Contains(out, "| representer, signed by class |") {
		t.Errorf("markdown rows out of order or missing:\n%s", out)
	}
	if !strings.Contains(out, "| 0.250 ± 0.010 | – | 0.900 (0.950) | 1.000 (–) |") || !strings.Contains(out, `"a\|b"`) {
		t.Errorf("markdown cells:\n%s", out)
	}
}
