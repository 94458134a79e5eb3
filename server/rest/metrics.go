package rest

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of the API listener.
const (
	MetricRequests    = "fa_broker_http_requests_total"
	MetricDuration    = "fa_broker_http_request_duration_seconds"
	MetricRateLimited = "fa_broker_http_rate_limited_total"
)

type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited prometheus.Counter

	// children holds the series of each route × method × status seen so
	// far, copied on write: a request reads it without a lock and without
	// resolving labels (hashing them, formatting the status). Its size is
	// bounded by the routes, the methods Fiber knows and the statuses the
	// API answers, as the series are.
	children atomic.Pointer[map[seriesKey]series]
	mu       sync.Mutex // serialises the writers of children
}

// seriesKey names the series of one request.
type seriesKey struct {
	route, method string
	status        int
}

// series are the children of one seriesKey.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Broker API requests by route template, method and HTTP status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricDuration,
			Help: "Broker API request latency by route template and method (long-polls include their wait).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
				5, 10, 30, 60},
		}, []string{"route", "method"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRateLimited,
			Help: "Requests answered 429 by the per-CN rate limit.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.rateLimited)
	}
	return m
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	sr := m.series(seriesKey{route: route, method: method, status: status})
	sr.requests.Inc()
	sr.duration.Observe(d.Seconds())
}

// series returns k's children, resolving them on first use.
func (m *metrics) series(k seriesKey) series {
	if c := m.children.Load(); c != nil {
		if sr, ok := (*c)[k]; ok {
			return sr
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.children.Load()
	if old != nil {
		if sr, ok := (*old)[k]; ok {
			return sr
		}
	}
	next := make(map[seriesKey]series, 1)
	if old != nil {
		maps.Copy(next, *old)
	}
	sr := series{
		requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
		duration: m.duration.WithLabelValues(k.route, k.method),
	}
	next[k] = sr
	m.children.Store(&next)
	return sr
}
