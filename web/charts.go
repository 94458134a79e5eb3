package web

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// palette gives each provider a stable colour (by sorted position). It has
// no green and no red: a provider's colour must not suggest a clean or a
// dirty grid (a coal grid drawn in green), nor good or bad.
var palette = [...]string{"#1f6feb", "#8250df", "#9a6700", "#bf3989", "#57606a", "#0550ae", "#6e5494", "#b35900"}

// MaxHoverPoints bounds the points of one line that show their value on
// hover (the newest changes are kept).
const MaxHoverPoints = 60

func colorOf(i int) string { return palette[i%len(palette)] }

const (
	chartW, chartH        = 420, 180
	plotL, plotR          = 40, 400
	plotTop, plotBottom   = 10, 160
	chartValueLabelDigits = 3
)

type metric func(sample) (float64, bool)

// buildChart renders one metric of every provider over [now-window, now] as
// polylines in SVG user units, from the metric's points of each provider
// since at least now-window (chartSeries).
func buildChart(id, title, unit string, now time.Time, window time.Duration, ids []string, points [][]chartPoint, format func(float64) string) views.Chart {
	c := views.Chart{
		ID: id, Title: title, Unit: unit, Width: chartW, Height: chartH,
		PlotLeft: plotL, PlotRight: plotR, PlotTop: plotTop, PlotBottom: plotBottom,
	}
	from := now.Add(-window)
	lines, maxV := within(points, from)
	sc := chartScale{from: from, window: window, top: niceCeil(maxV)}
	for i, pts := range lines {
		if len(pts) == 0 {
			continue
		}
		vs, hover := sc.steps(pts, ids[i], format)
		vs = straighten(vs)
		last := pts[len(pts)-1]
		c.Lines = append(c.Lines, views.Polyline{
			Name: ids[i], Color: colorOf(i), Points: svgPoints(vs),
			LastX: f1(sc.x(last.t)), LastY: f1(sc.y(last.v)), LastTitle: ids[i] + ": " + format(last.v) + " at " + clockTime(last.t),
			Hover: hover,
		})
	}
	c.Empty = len(c.Lines) == 0
	c.YTicks, c.XTicks = sc.ticks(now)
	return c
}

// chartPoint is one value of a series at a time.
type chartPoint struct {
	t time.Time
	v float64
}

// within returns the points of each line since from (a line whose only
// point since from is the one holding its value to now has none) and
// their largest value. The lines share the points' arrays.
func within(points [][]chartPoint, from time.Time) ([][]chartPoint, float64) {
	maxV := 0.0
	lines := make([][]chartPoint, len(points))
	for i, pts := range points {
		if len(pts) == 0 {
			continue
		}
		samples := pts[:len(pts)-1] // the last one holds the value to now
		first := sort.Search(len(samples), func(k int) bool { return !samples[k].t.Before(from) })
		if first == len(samples) {
			continue
		}
		lines[i] = pts[first:]
		for _, p := range lines[i] {
			maxV = math.Max(maxV, p.v)
		}
	}
	return lines, maxV
}

// chartSeries returns each id's points of metric m since from, the last
// value held to now (computed once for the longest range; within cuts the
// shorter ones).
func chartSeries(now, from time.Time, ids []string, series map[string][]sample, m metric) [][]chartPoint {
	lines := make([][]chartPoint, len(ids))
	for i, pid := range ids {
		ring := series[pid] // oldest first
		first := sort.Search(len(ring), func(k int) bool { return !ring[k].at.Before(from) })
		var pts []chartPoint
		if first < len(ring) {
			pts = make([]chartPoint, 0, len(ring)-first+1)
		}
		for _, s := range ring[first:] {
			if v, ok := m(s); ok {
				pts = append(pts, chartPoint{s.at, v})
			}
		}
		if len(pts) > 0 {
			pts = append(pts, chartPoint{now, pts[len(pts)-1].v}) // hold the last value to "now"
		}
		lines[i] = pts
	}
	return lines
}

// chartScale maps times and values to SVG coordinates of the plot area.
type chartScale struct {
	from   time.Time
	window time.Duration
	top    float64
}

func (sc chartScale) x(t time.Time) float64 {
	return plotL + float64(t.Sub(sc.from))/float64(sc.window)*(plotR-plotL)
}

func (sc chartScale) y(v float64) float64 {
	return plotBottom - v/sc.top*(plotBottom-plotTop)
}

// vtx is a vertex of a polyline.
type vtx struct{ x, y float64 }

// steps draws pts (the last one only holds the value to "now") as steps:
// values hold until the next sample, so a vertex is emitted only where the
// value changes, and at most one change per SVG unit (the last value in
// that unit wins), which keeps the fragment small with a full hour of
// history. hover holds one point per value change (the last one per
// column), with its value and time, at most MaxHoverPoints.
func (sc chartScale) steps(pts []chartPoint, name string, format func(float64) string) ([]vtx, []views.HoverPoint) {
	var vs []vtx
	// The hover points are kept as sample indexes and formatted at the
	// end: most samples repeat the previous value and show nothing.
	var hoverAt []int
	for j, p := range pts[:len(pts)-1] {
		px, py := math.Round(sc.x(p.t)), sc.y(p.v)
		switch {
		case j == 0:
			vs = append(vs, vtx{px, py})
			hoverAt = append(hoverAt, j)
		case py == vs[len(vs)-1].y:
			continue
		case px == vs[len(vs)-1].x:
			// Same column: replace the value reached in this column.
			vs[len(vs)-1].y = py
			if len(vs) >= 2 && vs[len(vs)-2].x == px && vs[len(vs)-2].y == py {
				vs = vs[:len(vs)-1]
			}
			hoverAt[len(hoverAt)-1] = j
		default:
			vs = append(vs, vtx{px, vs[len(vs)-1].y}, vtx{px, py})
			hoverAt = append(hoverAt, j)
		}
	}
	if len(hoverAt) > MaxHoverPoints {
		hoverAt = hoverAt[len(hoverAt)-MaxHoverPoints:]
	}
	hover := make([]views.HoverPoint, 0, len(hoverAt))
	for _, j := range hoverAt {
		p := pts[j]
		hover = append(hover, views.HoverPoint{
			X: f1(math.Round(sc.x(p.t))), Y: f1(sc.y(p.v)), Title: name + ": " + format(p.v) + " at " + clockTime(p.t),
		})
	}
	lastX := math.Round(sc.x(pts[len(pts)-1].t))
	if end := vs[len(vs)-1]; end.x < lastX {
		vs = append(vs, vtx{lastX, end.y})
	}
	return vs, hover
}

// straighten drops the vertices in the middle of a horizontal or vertical
// run.
func straighten(vs []vtx) []vtx {
	kept := vs[:1]
	for j := 1; j < len(vs)-1; j++ {
		p, v, n := kept[len(kept)-1], vs[j], vs[j+1]
		if (p.y == v.y && v.y == n.y) || (p.x == v.x && v.x == n.x) {
			continue
		}
		kept = append(kept, v)
	}
	if len(vs) > 1 {
		kept = append(kept, vs[len(vs)-1])
	}
	return kept
}

// svgPoints is the points attribute of a polyline through vs.
func svgPoints(vs []vtx) string {
	b := make([]byte, 0, len(vs)*12)
	for j, v := range vs {
		if j > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendFloat(b, v.x, 'f', 1, 64)
		b = append(b, ',')
		b = strconv.AppendFloat(b, v.y, 'f', 1, 64)
	}
	return string(b)
}

// ticks are the axes' labels: 0, half and the top of the values; the
// window in fifths, ending at the clock time of now.
func (sc chartScale) ticks(now time.Time) (yTicks, xTicks []views.Tick) {
	for _, frac := range []float64{0, 0.5, 1} {
		v := sc.top * frac
		yTicks = append(yTicks, views.Tick{Pos: f1(sc.y(v)), Label: tickLabel(v)})
	}
	const n = 5
	for i := 0; i <= n; i++ {
		at := sc.from.Add(sc.window * time.Duration(i) / n)
		// The end is the moment the chart was drawn to (the long ranges
		// are drawn less often, see chartCadence).
		label := clockTime(now)
		if i < n {
			label = "-" + strconv.FormatFloat(now.Sub(at).Minutes(), 'g', 3, 64) + "m"
		}
		xTicks = append(xTicks, views.Tick{Pos: f1(sc.x(at)), Label: label})
	}
	return yTicks, xTicks
}

// chartRanges are the time ranges the charts offer: 5 and 15 minutes,
// 1 hour, and the whole window when it is longer; only those within the
// window. The default is 1 hour (or the window when shorter).
type chartRange struct {
	views.ChartRange
	span time.Duration
}

func chartRanges(window time.Duration) []chartRange {
	var out []chartRange
	for _, r := range []struct {
		id, label string
		d         time.Duration
	}{{"5m", "5 min", 5 * time.Minute}, {"15m", "15 min", 15 * time.Minute}, {"1h", "1 hour", time.Hour}} {
		if r.d <= window {
			out = append(out, chartRange{views.ChartRange{ID: r.id, Label: r.label}, r.d})
		}
	}
	if window > time.Hour || len(out) == 0 {
		out = append(out, chartRange{views.ChartRange{ID: "all", Label: "all " + shortDuration(window)}, window})
	}
	def := len(out) - 1
	for i, r := range out {
		if r.ID == "1h" {
			def = i
		}
	}
	out[def].Default = true
	return out
}

// niceCeil rounds v up to 1, 2 or 5 × 10^k (at least 1).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	exp := math.Floor(math.Log10(v))
	base := math.Pow(10, exp)
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*base*(1+1e-9) {
			return m * base
		}
	}
	return 10 * base
}

// tickLabel renders an axis value with at most three significant digits
// and no exponent below a million (1000, not 1e+03).
func tickLabel(v float64) string {
	if v >= 1000 && v < 1e6 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', chartValueLabelDigits, 64)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// shortDuration renders 6h0m0s as "6h" and 90m as "1h30m".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
