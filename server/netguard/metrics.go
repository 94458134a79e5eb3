package netguard

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a process's fa_listener_* collectors.
type metrics struct {
	open, max    *prometheus.GaugeVec
	dropped      *prometheus.CounterVec
	acceptErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fa_listener_open_connections", Help: "Connections a listener holds (in the handshake gate or being served).",
		}, []string{"listener"}),
		max: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fa_listener_max_connections", Help: "The listener's cap on open connections (--max-conns, resolved).",
		}, []string{"listener"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_listener_dropped_connections_total",
			Help: "Connections closed before the server saw them, by reason: max_conns, max_conns_per_ip, handshake_timeout, handshake_failed.",
		}, []string{"listener", "reason"}),
		acceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fa_listener_accept_errors_total", Help: "Temporary accept errors (e.g. EMFILE) the listener retried after a backoff.",
		}, []string{"listener"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.max, m.dropped, m.acceptErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the listener metrics: %w", err)
		}
	}
	return m, nil
}

// listenerMetrics are one listener's children (unregistered sinks without a
// registry).
type listenerMetrics struct {
	open         prometheus.Gauge
	acceptErrors prometheus.Counter
	drops        map[string]prometheus.Counter
}

func (m *metrics) forListener(name string, lim Limits) listenerMetrics {
	reasons := []string{ReasonMaxConns, ReasonMaxConnsPerIP, ReasonHandshakeTimeout, ReasonHandshakeFailed}
	lm := listenerMetrics{drops: map[string]prometheus.Counter{}}
	if m == nil {
		lm.open = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unregistered"})
		lm.acceptErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
		for _, r := range reasons {
			lm.drops[r] = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
		}
		return lm
	}
	m.max.WithLabelValues(name).Set(float64(lim.MaxConns))
	lm.open = m.open.WithLabelValues(name)
	lm.acceptErrors = m.acceptErrors.WithLabelValues(name)
	for _, r := range reasons {
		lm.drops[r] = m.dropped.WithLabelValues(name, r)
	}
	return lm
}

func (lm listenerMetrics) dropped(reason string) { lm.drops[reason].Inc() }
