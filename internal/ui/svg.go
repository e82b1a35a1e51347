package ui

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// Chart geometry (SVG user units; the stylesheet scales the element to its column).
const (
	chartW, chartH     = 480, 170
	chartL, chartR     = 68, 12
	chartT, chartB     = 14, 26
	barRowH, barLabelW = 22, 190
)

// chart is one overview panel: a title and the metrics drawn in it.
type chart struct {
	Title string
	Unit  string
	SVG   template.HTML
	Last  string // the latest value of each line, for the caption
}

// charts groups the samples' metrics into panels (metricInfo's chart names, in order)
// and draws each as an SVG line chart.
func charts(samples []Sample) []chart {
	var out []chart
	var order []string
	groups := map[string][]int{}
	for i, m := range metricInfo {
		if _, ok := groups[m.chart]; !ok {
			order = append(order, m.chart)
		}
		groups[m.chart] = append(groups[m.chart], i)
	}
	for _, title := range order {
		idx := groups[title]
		var last []string
		for _, i := range idx {
			v := math.NaN()
			for j := len(samples) - 1; j >= 0; j-- {
				if x := samples[j].Values[i]; !math.IsNaN(x) {
					v = x
					break
				}
			}
			last = append(last, metricInfo[i].title+" "+formatValue(v))
		}
		out = append(out, chart{Title: title, Unit: metricInfo[idx[0]].unit,
			SVG: lineChart(samples, idx), Last: strings.Join(last, ", ")})
	}
	return out
}

// formatValue prints v with four significant digits, or "–" for NaN.
func formatValue(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.4g", v)
}

// lineChart draws metrics idx of samples against time: one polyline per metric (broken
// at NaN gaps), the value range on the y axis (from 0 when every value is ≥ 0) and the
// time span on the x axis.
func lineChart(samples []Sample, idx []int) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH)
	pw, ph := float64(chartW-chartL-chartR), float64(chartH-chartT-chartB)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range samples {
		for _, i := range idx {
			if v := s.Values[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%g" height="%g"/>`, chartL, chartT, pw, ph)
	if math.IsInf(lo, 0) || len(samples) == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%g" y="%g">no data yet</text></svg>`, float64(chartL)+pw/2, float64(chartT)+ph/2)
		return template.HTML(b.String())
	}
	if lo >= 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	t0, t1 := samples[0].At, samples[len(samples)-1].At
	span := t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 {
		if span <= 0 {
			return float64(chartL) + pw
		}
		return float64(chartL) + pw*t.Sub(t0).Seconds()/span
	}
	y := func(v float64) float64 { return float64(chartT) + ph*(1-(v-lo)/(hi-lo)) }
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%g" text-anchor="end">%s</text>`, chartL-4, y(hi)+4, formatValue(hi))
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%g" text-anchor="end">%s</text>`, chartL-4, y(lo)+4, formatValue(lo))
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">%s</text>`, chartL, chartH-8, t0.UTC().Format("15:04:05"))
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s UTC</text>`, chartW-chartR, chartH-8, t1.UTC().Format("15:04:05"))
	for li, i := range idx {
		var pts []string
		flush := func() {
			switch len(pts) {
			case 0:
			case 1: // an isolated value: a dot
				fmt.Fprintf(&b, `<circle class="dot l%d" cx="%s" r="2.5"/>`, li, strings.Replace(pts[0], ",", `" cy="`, 1))
			default:
				fmt.Fprintf(&b, `<polyline class="line l%d" points="%s"/>`, li, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for _, s := range samples {
			v := s.Values[i]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(v)))
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// bar is one row of an answer's score chart.
type bar struct {
	Label         string
	Score, Radius float64
	Top           bool // in the top-K
}

// barChart draws each bar's score Î as a bar and its interval [Î−ε, Î+ε] as a whisker,
// with the cut: the lower end of the top-K's intervals (min Î−ε over the top-K, solid)
// and the upper end below it (max Î+ε below the cut, dashed). A certified answer has the
// solid line right of the dashed one.
func barChart(bars []bar, lower, upper float64) template.HTML {
	h := chartT + chartB + barRowH*len(bars)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bars" viewBox="0 0 %d %d" role="img" xmlns="http://www.w3.org/2000/svg">`, chartW+barLabelW-chartL, h)
	lo, hi := 0.0, 0.0
	for _, r := range bars {
		lo, hi = math.Min(lo, r.Score-r.Radius), math.Max(hi, r.Score+r.Radius)
	}
	for _, v := range []float64{lower, upper} {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	pw := float64(chartW - chartL - chartR)
	x := func(v float64) float64 { return float64(barLabelW) + pw*(v-lo)/(hi-lo) }
	for i, r := range bars {
		y := float64(chartT + i*barRowH)
		cls := "rest"
		if r.Top {
			cls = "top"
		}
		x0, x1 := x(math.Min(0, r.Score)), x(math.Max(0, r.Score))
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%g" text-anchor="end">%s</text>`, barLabelW-6, y+barRowH*0.65, template.HTMLEscapeString(r.Label))
		fmt.Fprintf(&b, `<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%d"/>`, cls, x0, y+4, x1-x0, barRowH-8)
		fmt.Fprintf(&b, `<line class="whisker" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x(r.Score-r.Radius), x(r.Score+r.Radius), y+barRowH/2, y+barRowH/2)
	}
	bottom := float64(chartT + len(bars)*barRowH)
	if !math.IsNaN(lower) && !math.IsInf(lower, 0) {
		fmt.Fprintf(&b, `<line class="cut lower" x1="%.1f" x2="%.1f" y1="%d" y2="%.1f"/>`, x(lower), x(lower), chartT-4, bottom+4)
	}
	if !math.IsNaN(upper) && !math.IsInf(upper, 0) {
		fmt.Fprintf(&b, `<line class="cut upper" x1="%.1f" x2="%.1f" y1="%d" y2="%.1f"/>`, x(upper), x(upper), chartT-4, bottom+4)
	}
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%g">%s</text>`, barLabelW, bottom+18, formatValue(lo))
	fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g" text-anchor="end">%s</text>`, float64(barLabelW)+pw, bottom+18, formatValue(hi))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
