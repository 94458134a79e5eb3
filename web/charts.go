package web

import (
	"math"
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
// polylines in SVG user units.
func buildChart(id, title, unit string, now time.Time, window time.Duration, ids []string, series map[string][]sample, m metric, format func(float64) string) views.Chart {
	c := views.Chart{
		ID: id, Title: title, Unit: unit, Width: chartW, Height: chartH,
		PlotLeft: plotL, PlotRight: plotR, PlotTop: plotTop, PlotBottom: plotBottom,
	}
	from := now.Add(-window)
	maxV := 0.0
	type pt struct {
		t time.Time
		v float64
	}
	lines := make([][]pt, len(ids))
	for i, pid := range ids {
		var pts []pt
		for _, s := range series[pid] {
			if v, ok := m(s); ok && !s.at.Before(from) {
				pts = append(pts, pt{s.at, v})
			}
		}
		if len(pts) > 0 {
			pts = append(pts, pt{now, pts[len(pts)-1].v}) // hold the last value to "now"
		}
		for _, p := range pts {
			maxV = math.Max(maxV, p.v)
		}
		lines[i] = pts
	}
	top := niceCeil(maxV)
	x := func(t time.Time) float64 {
		return plotL + float64(t.Sub(from))/float64(window)*(plotR-plotL)
	}
	y := func(v float64) float64 {
		return plotBottom - v/top*(plotBottom-plotTop)
	}
	for i, pts := range lines {
		if len(pts) == 0 {
			continue
		}
		var b strings.Builder
		// Values hold until the next sample: draw steps, emitting a vertex
		// only where the value changes, and at most one change per SVG unit
		// (the last value in that unit wins). The fragment stays small with
		// a full hour of history.
		type vtx struct{ x, y float64 }
		var vs []vtx
		// hover holds one point per value change (the last one per
		// column), with its value and time.
		var hover []views.HoverPoint
		for j, p := range pts[:len(pts)-1] { // the last point only holds the value to "now"
			px, py := math.Round(x(p.t)), y(p.v)
			hp := views.HoverPoint{X: f1(px), Y: f1(py), Title: ids[i] + ": " + format(p.v) + " at " + clockTime(p.t)}
			switch {
			case j == 0:
				vs = append(vs, vtx{px, py})
				hover = append(hover, hp)
			case py == vs[len(vs)-1].y:
				continue
			case px == vs[len(vs)-1].x:
				// Same column: replace the value reached in this column.
				vs[len(vs)-1].y = py
				if len(vs) >= 2 && vs[len(vs)-2].x == px && vs[len(vs)-2].y == py {
					vs = vs[:len(vs)-1]
				}
				hover[len(hover)-1] = hp
			default:
				vs = append(vs, vtx{px, vs[len(vs)-1].y}, vtx{px, py})
				hover = append(hover, hp)
			}
		}
		if len(hover) > MaxHoverPoints {
			hover = hover[len(hover)-MaxHoverPoints:]
		}
		lastX := math.Round(x(now))
		if end := vs[len(vs)-1]; end.x < lastX {
			vs = append(vs, vtx{lastX, end.y})
		}
		// Drop vertices in the middle of a horizontal or vertical run.
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
		vs = kept
		for j, v := range vs {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(f1(v.x) + "," + f1(v.y))
		}
		last := pts[len(pts)-1]
		c.Lines = append(c.Lines, views.Polyline{
			Name: ids[i], Color: colorOf(i), Points: b.String(),
			LastX: f1(x(last.t)), LastY: f1(y(last.v)), LastTitle: ids[i] + ": " + format(last.v) + " now",
			Hover: hover,
		})
	}
	c.Empty = len(c.Lines) == 0
	for _, frac := range []float64{0, 0.5, 1} {
		v := top * frac
		c.YTicks = append(c.YTicks, views.Tick{Pos: f1(y(v)), Label: tickLabel(v)})
	}
	const xTicks = 5
	for i := 0; i <= xTicks; i++ {
		at := from.Add(window * time.Duration(i) / xTicks)
		label := "now"
		if i < xTicks {
			label = "-" + strconv.FormatFloat(now.Sub(at).Minutes(), 'g', 3, 64) + "m"
		}
		c.XTicks = append(c.XTicks, views.Tick{Pos: f1(x(at)), Label: label})
	}
	return c
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
