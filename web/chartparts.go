package web

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// chartCadence is how often a range's charts are drawn again: every 1/60
// of its span (5 s for 5 minutes, 15 s for 15 minutes, a minute for an
// hour), never more often than the history is sampled. Between two draws
// a range's end moves by at most 6 of its 360 px, and its last tick says
// the moment it ends. The long ranges, most of a chart's points, are
// drawn 12 times less often than each sample.
func chartCadence(span, sampleEvery time.Duration) time.Duration {
	return max(span/60, sampleEvery)
}

// chartsCache is the live dashboard's charts panel: each range's charts
// are kept as rendered and drawn again at the range's cadence, or when the
// providers charted (the legend) changed. A panel in which only some
// ranges were drawn again is patchable by them. Safe for concurrent use
// (the publisher and page loads).
type chartsCache struct {
	mu    sync.Mutex
	valid bool
	gen   uint64      // the history's generation last looked at
	ids   []string    // the providers charted (the legend)
	sets  [][]byte    // each range's charts (chartRanges' order)
	drawn []time.Time // the history's last sample each set ends at
	html  segments    // the panel: its frame's head, the sets, its tail
	// renders counts the panel's renders, draws each range's (tests).
	renders int
	draws   map[string]int
}

// get returns the charts panel of hist as of its last sample.
func (c *chartsCache) get(ctx context.Context, hist *history, cur string) (templ.Component, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The generation is taken before the snapshot: a sample meanwhile
	// moves it again and is looked at next time.
	gen := hist.generation()
	if c.valid && gen == c.gen {
		return c.html, nil
	}
	rs := chartRanges(hist.window)
	var sameIDs bool
	redraw := make([]bool, len(rs))
	longest := time.Duration(0)
	// Which ranges are drawn again decides how much of the history is
	// copied: most samples draw only the five minutes.
	ids, series, now := hist.snapshotSince(func(now time.Time, ids []string) time.Duration {
		sameIDs = c.valid && slices.Equal(ids, c.ids) && len(c.sets) == len(rs)
		for i, r := range rs {
			// Half a sample early: a sampler tick that comes a little
			// early does not put a range off by a whole sample.
			redraw[i] = !sameIDs || now.Before(c.drawn[i]) || now.Sub(c.drawn[i]) >= chartCadence(r.span, hist.every)-hist.every/2
			if redraw[i] {
				longest = max(longest, r.span)
			}
		}
		return longest
	})
	c.gen = gen
	if longest == 0 {
		return c.html, nil
	}
	m := metricsSince(now, now.Add(-longest), ids, series)
	sets, drawn := make([][]byte, len(rs)), make([]time.Time, len(rs))
	var patch segments // the sets drawn again, not copied
	labels := make([]views.ChartRange, 0, len(rs))
	for i, r := range rs {
		labels = append(labels, r.ChartRange)
		if !redraw[i] {
			sets[i], drawn[i] = c.sets[i], c.drawn[i]
			continue
		}
		r.Charts = rangeCharts(r, now, ids, m, cur)
		var buf bytes.Buffer
		if i < len(c.sets) {
			buf.Grow(len(c.sets[i]) + len(c.sets[i])/8)
		}
		if err := views.ChartSet(r.ChartRange).Render(ctx, &buf); err != nil {
			c.valid = false
			return nil, err
		}
		sets[i], drawn[i] = buf.Bytes(), now
		patch = append(patch, sets[i])
		if c.draws == nil {
			c.draws = map[string]int{}
		}
		c.draws[r.ID]++
	}
	// The frame (the range labels and the legend) is rendered around a
	// mark where the sets go, and the panel is the pieces: the sets are
	// not copied into it.
	var buf bytes.Buffer
	if err := views.ChartsFrame(labels, legendOf(ids), templ.Raw(setsMark)).Render(ctx, &buf); err != nil {
		c.valid = false
		return nil, err
	}
	head, tail, ok := bytes.Cut(buf.Bytes(), []byte(setsMark))
	if !ok {
		c.valid = false
		return nil, errors.New("the charts frame lost the mark of its chart sets")
	}
	panel := append(append(segments{head}, sets...), tail)
	base := c.html
	c.valid, c.ids, c.sets, c.drawn, c.html = true, ids, sets, drawn, panel
	c.renders++
	if sameIDs {
		// The labels and the legend are as before: the ranges drawn
		// again are the change.
		return patchable{segments: panel, base: base, patch: patch}, nil
	}
	return panel, nil
}

// setsMark stands for the chart sets in the rendered charts frame.
const setsMark = "<!--chart-sets-->"
