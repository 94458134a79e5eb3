package experiment

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// unit is the metric's unit on the charts.
func unit(metric string) string {
	if metric == MetricLatency {
		return "round trip (ms)"
	}
	return "carbon intensity (gCO2eq/kWh)"
}

// iterMeans is one phase's mean value, best and worst per iteration.
type iterMeans struct {
	tau               []float64
	value, best, wrst []float64
}

func meansByIteration(phase string, sels []Selection) iterMeans {
	type acc struct {
		n                   int
		tau, v, best, worst float64
	}
	by := map[int]*acc{}
	for _, s := range sels {
		if s.Phase != phase {
			continue
		}
		a := by[s.Iteration]
		if a == nil {
			a = &acc{}
			by[s.Iteration] = a
		}
		a.n++
		a.tau += s.Tau.Seconds()
		a.v, a.best, a.worst = a.v+s.Value, a.best+s.Best, a.worst+s.Worst
	}
	var ks []int
	for k := range by {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var m iterMeans
	for _, k := range ks {
		a := by[k]
		n := float64(a.n)
		m.tau = append(m.tau, a.tau/n)
		m.value, m.best, m.wrst = append(m.value, a.v/n), append(m.best, a.best/n), append(m.wrst, a.worst/n)
	}
	return m
}

// Charts draws timeline.{png,svg} (each phase's mean choice per iteration
// over the phase's time, inside the band between the achievable best and
// worst of the baseline's iterations: the conditions are replayed, so the
// band is every phase's) and boxes.{png,svg} (per phase the chosen
// values, and the achievable minimum).
func Charts(dir string, cfg *Config, rec *Records, s *Summary) error {
	tl, err := timeline(cfg, rec, s)
	if err != nil {
		return err
	}
	bx, err := boxes(cfg, rec, s)
	if err != nil {
		return err
	}
	for name, p := range map[string]*plot.Plot{Files.Timeline: tl, Files.Boxes: bx} {
		for _, ext := range []string{".png", ".svg"} {
			if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, name+ext)); err != nil {
				return fmt.Errorf("drawing %s%s: %w", name, ext, err)
			}
		}
	}
	return nil
}

func timeline(cfg *Config, rec *Records, s *Summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %d consumers × %d providers", s.Suite, s.Consumers, s.Providers)
	p.X.Label.Text = "time since the phase started (s)"
	p.Y.Label.Text = unit(cfg.Metric)
	p.Legend.Top = true
	base := meansByIteration(cfg.Phases[0].Name, rec.Selections)
	if len(base.tau) > 0 {
		var band plotter.XYs
		for i := range base.tau {
			band = append(band, plotter.XY{X: base.tau[i], Y: base.best[i]})
		}
		for i := len(base.tau) - 1; i >= 0; i-- {
			band = append(band, plotter.XY{X: base.tau[i], Y: base.wrst[i]})
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return nil, err
		}
		poly.Color = color.NRGBA{R: 190, G: 190, B: 190, A: 150}
		poly.Width = 0
		p.Add(poly)
		p.Legend.Add("achievable best … worst", poly)
	}
	for i, ph := range cfg.Phases {
		m := meansByIteration(ph.Name, rec.Selections)
		if len(m.tau) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(m.tau))
		for j := range m.tau {
			pts[j] = plotter.XY{X: m.tau[j], Y: m.value[j]}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s (%s)", ph.Name, ph.Policy), line, points)
	}
	return p, nil
}

func boxes(cfg *Config, rec *Records, s *Summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: chosen values per phase, %d × %d", s.Suite, s.Consumers, s.Providers)
	p.Y.Label.Text = unit(cfg.Metric)
	var names []string
	var best plotter.Values
	w := vg.Points(24)
	for i, ph := range cfg.Phases {
		var vals plotter.Values
		for _, sel := range rec.Selections {
			if sel.Phase == ph.Name {
				vals = append(vals, sel.Value)
				best = append(best, sel.Best)
			}
		}
		names = append(names, fmt.Sprintf("%s (%s)", ph.Name, ph.Policy))
		if len(vals) == 0 {
			continue
		}
		b, err := plotter.NewBoxPlot(w, float64(i), vals)
		if err != nil {
			return nil, err
		}
		b.FillColor = plotutil.Color(i)
		p.Add(b)
	}
	names = append(names, "achievable minimum")
	if len(best) > 0 {
		b, err := plotter.NewBoxPlot(w, float64(len(cfg.Phases)), best)
		if err != nil {
			return nil, err
		}
		b.FillColor = color.RGBA{R: 200, G: 200, B: 200, A: 255}
		p.Add(b)
	}
	p.NominalX(names...)
	return p, nil
}
