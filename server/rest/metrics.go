package rest

import (
	"strconv"
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
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, method).Observe(d.Seconds())
}
