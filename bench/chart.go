package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"time"
)

// chart geometry, in SVG user units.
const (
	chartW, chartH          = 860, 500
	plotL, plotR            = 70, 640
	plotT, plotB            = 50, 440
	minChartMS              = 0.01 // zero latencies are drawn here
	maxPointsPerChartSeries = 500
)

var chartColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// WriteSVG draws the cumulative distribution of each series' latencies on
// a logarithmic time axis: how many events (y) arrived within x ms.
func WriteSVG(w io.Writer, title string, series []Series) error {
	bw := bufio.NewWriter(w)
	lo, hi := math.Inf(1), math.Inf(-1)
	sorted := make([][]float64, len(series))
	for i, s := range series {
		v := make([]float64, len(s.Latencies))
		for j, d := range s.Latencies {
			v[j] = max(minChartMS, float64(d)/float64(time.Millisecond))
		}
		slices.Sort(v)
		sorted[i] = v
		if len(v) > 0 {
			lo, hi = min(lo, v[0]), max(hi, v[len(v)-1])
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	decLo := math.Floor(math.Log10(lo))
	decHi := math.Ceil(math.Log10(hi))
	if decHi <= decLo {
		decHi = decLo + 1
	}
	x := func(v float64) float64 {
		return plotL + (math.Log10(v)-decLo)/(decHi-decLo)*(plotR-plotL)
	}
	y := func(q float64) float64 { return plotB - q*(plotB-plotT) }

	svgHeader(bw, title)
	// Grid: decades and their 2x and 5x on x, quantiles on y.
	for d := decLo; d <= decHi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if d == decHi && m > 1 {
				break
			}
			stroke, width := "#e5e5e5", 1
			if m == 1 {
				stroke = "#bbbbbb"
			}
			fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%d"/>`+"\n", x(v), plotT, x(v), plotB, stroke, width)
			if m == 1 {
				fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), plotB+18, fmtAxisMS(v))
			}
		}
	}
	for _, q := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", plotL, y(q), plotR, y(q))
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%g%%</text>`+"\n", plotL-6, y(q)+4, q*100)
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">commit-to-consume latency (ms, log scale)</text>`+"\n", (plotL+plotR)/2, plotB+40)
	fmt.Fprintf(bw, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">events delivered within</text>`+"\n", (plotT+plotB)/2)

	for i, s := range series {
		v := sorted[i]
		if len(v) == 0 {
			continue
		}
		color := chartColors[i%len(chartColors)]
		fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, color)
		// A step function through at most maxPointsPerChartSeries
		// quantiles, plus the last value so the tail shows.
		steps := min(len(v), maxPointsPerChartSeries)
		x0 := x(v[0])
		fmt.Fprintf(bw, "%.1f,%.1f", x0, y(0))
		for k := 1; k <= steps; k++ {
			idx := k*len(v)/steps - 1
			q := float64(idx+1) / float64(len(v))
			px := x(v[idx])
			fmt.Fprintf(bw, " %.1f,%.1f %.1f,%.1f", px, y(float64(idx)/float64(len(v))), px, y(q))
		}
		fmt.Fprint(bw, `"/>`+"\n")
		// Legend, with the figures a reader looks for.
		sd := make([]time.Duration, len(s.Latencies))
		copy(sd, s.Latencies)
		slices.Sort(sd)
		l := summarizeSorted(sd)
		ly := plotT + 10 + i*legendStep(len(series))
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", plotR+16, ly, plotR+40, ly, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotR+46, ly+4, html.EscapeString(s.Name))
		if legendStep(len(series)) >= 30 {
			fmt.Fprintf(bw, `<text x="%d" y="%d" fill="#444">p50 %s · p99 %s ms</text>`+"\n", plotR+46, ly+20, fmtFig(l.P50), fmtFig(l.P99))
		}
	}
	fmt.Fprint(bw, "</svg>\n")
	return bw.Flush()
}

// svgHeader opens a chart: the document, a white background, the title.
func svgHeader(bw *bufio.Writer, title string) {
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>
`, chartW, chartH, chartW, chartH, plotL, html.EscapeString(title))
}

func fmtAxisMS(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%gs", v/1000)
	default:
		return fmt.Sprintf("%g", v)
	}
}

func fmtFig(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// RatePoint is a run's latency at one offered rate.
type RatePoint struct {
	Rate     float64 // events per second
	P50, P99 float64 // ms
}

// RateSeries is one run ("wal", "floor") across a sweep's rates.
type RateSeries struct {
	Name   string
	Points []RatePoint
}

// WriteRateSVG draws latency against offered rate, both axes logarithmic:
// for each series its p99 (solid, with markers) and p50 (dashed). Where a
// relay's line leaves the floor's and turns up, it saturates.
func WriteRateSVG(w io.Writer, title string, series []RateSeries) error {
	bw := bufio.NewWriter(w)
	rLo, rHi := math.Inf(1), math.Inf(-1)
	lLo, lHi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.Points {
			rLo, rHi = min(rLo, p.Rate), max(rHi, p.Rate)
			for _, v := range []float64{p.P50, p.P99} {
				v = max(minChartMS, v)
				lLo, lHi = min(lLo, v), max(lHi, v)
			}
		}
	}
	if math.IsInf(rLo, 1) {
		rLo, rHi, lLo, lHi = 100, 1000, 0.1, 1
	}
	// Axes span whole decades around the data.
	xLo, xHi := math.Floor(math.Log10(rLo)), math.Ceil(math.Log10(rHi))
	if xHi <= xLo {
		xHi = xLo + 1
	}
	yLo, yHi := math.Floor(math.Log10(lLo)), math.Ceil(math.Log10(lHi))
	if yHi <= yLo {
		yHi = yLo + 1
	}
	x := func(rate float64) float64 {
		return plotL + (math.Log10(rate)-xLo)/(xHi-xLo)*(plotR-plotL)
	}
	y := func(v float64) float64 {
		return plotB - (math.Log10(max(minChartMS, v))-yLo)/(yHi-yLo)*(plotB-plotT)
	}

	svgHeader(bw, title)
	for d := xLo; d <= xHi; d++ {
		for _, m := range []float64{1, 2, 5} {
			if d == xHi && m > 1 {
				break
			}
			v := m * math.Pow(10, d)
			stroke := "#e5e5e5"
			if m == 1 {
				stroke = "#bbbbbb"
			}
			fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(v), plotT, x(v), plotB, stroke)
			fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), plotB+18, v)
		}
	}
	for d := yLo; d <= yHi; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbbbbb"/>`+"\n", plotL, y(v), plotR, y(v))
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotL-6, y(v)+4, fmtAxisMS(v))
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">offered load (events/s, log scale)</text>`+"\n", (plotL+plotR)/2, plotB+40)
	fmt.Fprintf(bw, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">commit-to-consume latency (ms, log scale): p99 solid, p50 dashed</text>`+"\n", (plotT+plotB)/2)

	for i, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		pts := slices.Clone(s.Points)
		slices.SortFunc(pts, func(a, b RatePoint) int { return cmp.Compare(a.Rate, b.Rate) })
		color := chartColors[i%len(chartColors)]
		for _, q := range []struct {
			dash string
			v    func(RatePoint) float64
		}{
			{"", func(p RatePoint) float64 { return p.P99 }},
			{` stroke-dasharray="6 4"`, func(p RatePoint) float64 { return p.P50 }},
		} {
			fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="`, color, q.dash)
			for k, p := range pts {
				if k > 0 {
					bw.WriteByte(' ')
				}
				fmt.Fprintf(bw, "%.1f,%.1f", x(p.Rate), y(q.v(p)))
			}
			fmt.Fprint(bw, `"/>`+"\n")
		}
		for _, p := range pts {
			fmt.Fprintf(bw, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.Rate), y(p.P99), color)
		}
		last := pts[len(pts)-1]
		ly := plotT + 10 + i*legendStep(len(series))
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", plotR+16, ly, plotR+40, ly, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotR+46, ly+4, html.EscapeString(s.Name))
		if legendStep(len(series)) >= 30 {
			fmt.Fprintf(bw, `<text x="%d" y="%d" fill="#444">at %g/s: p50 %s · p99 %s ms</text>`+"\n", plotR+46, ly+20, last.Rate, fmtFig(last.P50), fmtFig(last.P99))
		}
	}
	fmt.Fprint(bw, "</svg>\n")
	return bw.Flush()
}

// legendStep is the height of a legend entry: 44 units, less when many
// series (a sweep's) would run off the chart.
func legendStep(n int) int {
	if n < 1 {
		return 44
	}
	return max(14, min(44, (chartH-plotT-20)/n))
}

// TimePoint is a reading at a time.
type TimePoint struct {
	T time.Duration // since the start
	V float64       // NaN: no reading (the line breaks)
}

// TimeSeries is one line of a chart over time.
type TimeSeries struct {
	Name   string
	Points []TimePoint
}

// Mark is a moment to show on a time chart, as a thin vertical line: a
// fault, say.
type Mark struct {
	T     time.Duration
	Label string
}

// WriteTimeSVG draws each series' readings over time, both axes linear,
// the y axis from zero, with marks (faults) as vertical lines under them:
// a series that grows without bound climbs to the right.
func WriteTimeSVG(w io.Writer, title, unit string, series []TimeSeries, marks []Mark) error {
	bw := bufio.NewWriter(w)
	tHi, vHi := time.Duration(0), 0.0
	for _, s := range series {
		for _, p := range s.Points {
			tHi = max(tHi, p.T)
			if !math.IsNaN(p.V) && !math.IsInf(p.V, 0) {
				vHi = max(vHi, p.V)
			}
		}
	}
	if tHi <= 0 {
		tHi = time.Minute
	}
	if vHi <= 0 {
		vHi = 1
	}
	vStep := niceStep(vHi / 5)
	vTop := math.Ceil(vHi/vStep) * vStep
	tStep := time.Duration(niceStep(tHi.Minutes()/6) * float64(time.Minute))
	if tStep <= 0 {
		tStep = time.Minute
	}
	x := func(t time.Duration) float64 { return plotL + float64(t)/float64(tHi)*(plotR-plotL) }
	y := func(v float64) float64 { return plotB - v/vTop*(plotB-plotT) }

	svgHeader(bw, title)
	for t := time.Duration(0); t <= tHi; t += tStep {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x(t), plotT, x(t), plotB)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(t), plotB+18, t.Minutes())
	}
	for v := 0.0; v <= vTop+vStep/2; v += vStep {
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", plotL, y(v), plotR, y(v))
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", plotL-6, y(v)+4, v)
	}
	for _, m := range marks {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#f0b0b0" stroke-dasharray="3 3"><title>%s</title></line>`+"\n",
			x(m.T), plotT, x(m.T), plotB, html.EscapeString(m.Label))
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">minutes (dashed: a fault)</text>`+"\n", (plotL+plotR)/2, plotB+40)
	fmt.Fprintf(bw, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotT+plotB)/2, html.EscapeString(unit))
	for i, s := range series {
		color := chartColors[i%len(chartColors)]
		open := false
		for _, p := range s.Points {
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
				if open {
					fmt.Fprint(bw, `"/>`+"\n")
					open = false
				}
				continue
			}
			if !open {
				fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, color)
				open = true
			} else {
				bw.WriteByte(' ')
			}
			fmt.Fprintf(bw, "%.1f,%.1f", x(p.T), y(p.V))
		}
		if open {
			fmt.Fprint(bw, `"/>`+"\n")
		}
		ly := plotT + 10 + i*legendStep(len(series))
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", plotR+16, ly, plotR+40, ly, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotR+46, ly+4, html.EscapeString(s.Name))
	}
	fmt.Fprint(bw, "</svg>\n")
	return bw.Flush()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
