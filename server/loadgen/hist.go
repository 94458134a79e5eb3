package loadgen

import (
	"math"
	"sync/atomic"
	"time"
)

// Latency histogram: log-spaced buckets, 16 per doubling (≤ 4.4 % relative
// error), from 1 µs to about 2^27 µs (134 s). Recording is one atomic add:
// no lock, no allocation, shared by every agent of a route.
const (
	bucketsPerDoubling = 16
	doublings          = 27
	numBuckets         = bucketsPerDoubling*doublings + 1
)

type histogram struct {
	counts [numBuckets]atomic.Int64
	maxNs  atomic.Int64
}

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	b := int(math.Ceil(math.Log2(us) * bucketsPerDoubling))
	return min(b, numBuckets-1)
}

// upperBound is the largest latency bucket b holds.
func upperBound(b int) time.Duration {
	return time.Duration(math.Exp2(float64(b)/bucketsPerDoubling) * float64(time.Microsecond))
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(d)].Add(1)
	for {
		m := h.maxNs.Load()
		if int64(d) <= m || h.maxNs.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantiles returns the upper bounds of the buckets holding each quantile
// (the max for q = 1) and the number of samples.
func (h *histogram) quantiles(qs ...float64) ([]time.Duration, int64) {
	var counts [numBuckets]int64
	var n int64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out, 0
	}
	maxD := time.Duration(h.maxNs.Load())
	for i, q := range qs {
		rank := int64(math.Ceil(q * float64(n)))
		var seen int64
		for b, c := range counts {
			seen += c
			if seen >= rank {
				out[i] = min(upperBound(b), maxD)
				break
			}
		}
	}
	return out, n
}
