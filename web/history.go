package web

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// sample is one provider's state at one time.
type sample struct {
	at       time.Time
	reserved float64
	price    float64 // NaN-free: hasPrice says whether it is set
	hasPrice bool
	carbon   float64
	hasCO2   bool
}

// history keeps, per provider, a bounded ring of samples over the last
// window. A sample less than half a period after the previous one replaces
// it, so a burst of changes costs one slot and the newest value always
// shows; the sampler's ticks, a period apart give or take the jitter of a
// wake-up, each get their own.
//
// A sample is never changed once in a ring's array (a replacement puts the
// ring in a new array, and trimming only reslices): snapshots share the
// arrays instead of copying an hour of samples for every chart drawn.
type history struct {
	mu     sync.Mutex
	window time.Duration
	every  time.Duration
	max    int
	series map[string][]sample
	// gen counts the records (0: none yet) and at is the time of the
	// last one: what the charts show changes only when gen moves.
	gen uint64
	at  time.Time
}

func newHistory(window, every time.Duration) *history {
	if window <= 0 {
		window = DefaultHistoryWindow
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	return &history{
		window: window, every: every,
		max:    int(window/every) + 2,
		series: make(map[string][]sample),
	}
}

// record samples every provider of ads at now. A provider's price is its
// cost per chunk by chunkCost's rule, the dashboard table's: a provider
// that prices only some resources of a chunk (unpriced there) has no price
// point, not one at 0.
func (h *history) record(now time.Time, ads []api.AdvertisementSnapshot, sizes map[api.ChunkType]corev1.ResourceList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	h.at = now
	seen := make(map[string]bool, len(ads))
	for _, a := range ads {
		seen[a.ClusterID] = true
		s := sample{at: now, reserved: float64(a.ReservedChunks)}
		s.price, s.hasPrice = chunkCost(a, sizes)
		if a.CarbonWeighted != nil {
			s.carbon, s.hasCO2 = *a.CarbonWeighted, true
		} else if a.CarbonIntensity != nil {
			s.carbon, s.hasCO2 = *a.CarbonIntensity, true
		}
		ring := h.series[a.ClusterID]
		if n := len(ring); n > 0 && now.Sub(ring[n-1].at) < h.every/2 {
			// Keep the older timestamp so a steady stream of changes still
			// advances one slot per period. A new array: a snapshot may
			// hold the old last sample.
			s.at = ring[n-1].at
			ring = append(ring[:n-1:n-1], s)
		} else {
			ring = append(ring, s)
		}
		h.series[a.ClusterID] = h.trim(now, ring)
	}
	for id, ring := range h.series {
		if !seen[id] {
			ring = h.trim(now, ring)
			if len(ring) == 0 {
				delete(h.series, id)
			} else {
				h.series[id] = ring
			}
		}
	}
}

func (h *history) trim(now time.Time, ring []sample) []sample {
	cut := 0
	for cut < len(ring) && now.Sub(ring[cut].at) > h.window {
		cut++
	}
	if len(ring)-cut > h.max {
		cut = len(ring) - h.max
	}
	// Resliced, not copied: the array is dropped when an append outgrows
	// it, so a full ring costs O(1) per record, not a copy of the window.
	return ring[cut:]
}

// generation counts the records so far: the series change only when it
// moves.
func (h *history) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// snapshot returns the series, providers sorted by id, and the time of the
// last record (zero before the first). The series share the history's
// arrays (see history): the caller must not modify them.
func (h *history) snapshot() (ids []string, series map[string][]sample, at time.Time) {
	return h.snapshotSince(func(time.Time, []string) time.Duration { return h.window })
}

// snapshotSince is snapshot with only the samples of the last span(at,
// ids) of each series (at least the last one before it, which holds its
// value into the span). span is called with the lock held.
func (h *history) snapshotSince(span func(at time.Time, ids []string) time.Duration) (ids []string, series map[string][]sample, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids = make([]string, 0, len(h.series))
	for id := range h.series {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	from := h.at.Add(-span(h.at, ids))
	series = make(map[string][]sample, len(h.series))
	for id, ring := range h.series {
		first := sort.Search(len(ring), func(k int) bool { return !ring[k].at.Before(from) })
		series[id] = ring[max(first-1, 0):len(ring):len(ring)]
	}
	return ids, series, h.at
}
