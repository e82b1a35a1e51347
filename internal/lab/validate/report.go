package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Stats is one ranking's row of the report.
type Stats struct {
	// LDS against the network retrained on each half: mean and standard error over the
	// queries whose correlation is defined, and their number.
	LDS, LDSSE float64
	LDSQueries int
	// LDS against cairn's encoder refitted on each half.
	LDSEncoder, LDSEncoderSE float64
	LDSEncoderQueries        int
	// DeletionPercentile is the median over queries of the percentile of the top-1
	// landmark point's removal among random single-point removals;
	// DeletionPercentileTop10 the same for the top 10 against random sets of 10. The
	// Midrank fields are the same medians with ties counted half (MidrankPercentile).
	DeletionPercentile, DeletionPercentileTop10               float64
	DeletionPercentileMidrank, DeletionPercentileTop10Midrank float64
	// RetrainDeletionPercentile is the deletion test against the network: the median over
	// queries of the percentile of the margin drop when the ranking's top points are left
	// out of the network's training, among the drops of random sets of as many points
	// (NaN where it did not run); the Midrank field the same with ties counted half.
	RetrainDeletionPercentile, RetrainDeletionPercentileMidrank float64
}

// MarshalJSON writes the stats under their report keys, NaN (undefined) as null.
func (s Stats) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"lds": num(s.LDS), "lds_se": num(s.LDSSE), "lds_queries": s.LDSQueries,
		"lds_encoder": num(s.LDSEncoder), "lds_encoder_se": num(s.LDSEncoderSE), "lds_encoder_queries": s.LDSEncoderQueries,
		"deletion_percentile": num(s.DeletionPercentile), "deletion_percentile_top10": num(s.DeletionPercentileTop10),
		"deletion_percentile_midrank": num(s.DeletionPercentileMidrank), "deletion_percentile_top10_midrank": num(s.DeletionPercentileTop10Midrank),
		"deletion_retrain_percentile": num(s.RetrainDeletionPercentile), "deletion_retrain_percentile_midrank": num(s.RetrainDeletionPercentileMidrank),
	})
}

// UnmarshalJSON reads what MarshalJSON writes, null as NaN.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var m map[string]*float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	f := func(k string) float64 {
		if v := m[k]; v != nil {
			return *v
		}
		return math.NaN()
	}
	*s = Stats{
		LDS: f("lds"), LDSSE: f("lds_se"), LDSQueries: int(f("lds_queries")),
		LDSEncoder: f("lds_encoder"), LDSEncoderSE: f("lds_encoder_se"), LDSEncoderQueries: int(f("lds_encoder_queries")),
		DeletionPercentile: f("deletion_percentile"), DeletionPercentileTop10: f("deletion_percentile_top10"),
		DeletionPercentileMidrank: f("deletion_percentile_midrank"), DeletionPercentileTop10Midrank: f("deletion_percentile_top10_midrank"),
		RetrainDeletionPercentile: f("deletion_retrain_percentile"), RetrainDeletionPercentileMidrank: f("deletion_retrain_percentile_midrank"),
	}
	return nil
}

// num maps NaN and ±Inf to nil (JSON null).
func num(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// Report is the output of cairnctl validate. Settings and Seconds are the caller's; they
// must hold no NaN (encoding/json refuses it).
type Report struct {
	Rankings  map[string]Stats `json:"rankings"`
	Baselines map[string]Stats `json:"baselines"`
	// Signed holds each ranking signed by class (SignedTo), a diagnostic of what the
	// label-free rankings miss; serving does not rank this way.
	Signed   map[string]Stats   `json:"signed,omitempty"`
	Settings map[string]any     `json:"settings"`
	Seconds  map[string]float64 `json:"seconds"`
}

// WriteMarkdown writes the report as a Markdown table, one row per ranking, per signed
// ranking, then per baseline (each LDS as mean ± standard error, each deletion percentile with its
// mid-rank form in parentheses), followed by the settings and times.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| ranking | LDS vs network | LDS vs encoder | deletion percentile (top-1) | deletion percentile (top-10) | deletion vs retraining |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	row := func(name string, s Stats) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s (%s) | %s (%s) | %s (%s) |\n", name, pm(s.LDS, s.LDSSE), pm(s.LDSEncoder, s.LDSEncoderSE),
			fixed(s.DeletionPercentile), fixed(s.DeletionPercentileMidrank), fixed(s.DeletionPercentileTop10), fixed(s.DeletionPercentileTop10Midrank),
			fixed(s.RetrainDeletionPercentile), fixed(s.RetrainDeletionPercentileMidrank))
	}
	for _, name := range ordered(r.Rankings, slices.Concat([]string{GradientCosine, Gradient}, Rankings, MarginRows)) {
		row(name, r.Rankings[name])
	}
	for _, name := range ordered(r.Signed, Rankings) {
		row(name+", signed by class", r.Signed[name])
	}
	for _, name := range ordered(r.Baselines, Baselines) {
		row(name+" (baseline)", r.Baselines[name])
	}
	b.WriteString("\n| setting | value |\n| --- | --- |\n")
	for _, k := range sortedKeys(r.Settings) {
		v, err := json.Marshal(r.Settings[k])
		if err != nil {
			return fmt.Errorf("setting %q: %w", k, err)
		}
		fmt.Fprintf(&b, "| %s | %s |\n", k, strings.ReplaceAll(string(v), "|", `\|`))
	}
	b.WriteString("\n| phase | seconds |\n| --- | --- |\n")
	for _, k := range sortedKeys(r.Seconds) {
		fmt.Fprintf(&b, "| %s | %s |\n", k, fixedN(r.Seconds[k], 1))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ordered returns the keys of m: those of first in its order, then the rest sorted.
func ordered(m map[string]Stats, first []string) []string {
	var out []string
	for _, k := range first {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(first, k) {
			out = append(out, k)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func pm(v, se float64) string {
	if math.IsNaN(se) || math.IsInf(se, 0) {
		return fixed(v)
	}
	return fixed(v) + " ± " + fixed(se)
}

func fixed(v float64) string { return fixedN(v, 3) }

func fixedN(v float64, d int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.*f", d, v)
}
