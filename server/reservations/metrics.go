package reservations

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

var allPhases = []api.Phase{
	api.PhasePending, api.PhaseGeneratingKubeconfig, api.PhaseKubeconfigReady, api.PhasePeering,
	api.PhasePeered, api.PhaseUnpeering, api.PhaseReleased, api.PhaseExpired, api.PhaseFailed,
}

type collector struct {
	s                                    *Service
	byPhase, chunksTotal, chunksReserved *prometheus.Desc
	waiters, pending                     *prometheus.Desc
	reevaluations, migrations            *prometheus.Desc
}

// Collector returns a Prometheus collector of the domain's gauges:
// fa_broker_reservations{phase}, fa_broker_chunks_total{provider,chunk_type},
// fa_broker_chunks_reserved{provider,chunk_type},
// fa_broker_longpoll_waiters, fa_broker_instructions_pending and the
// counter fa_broker_reevaluations_total{policy,decision} (re-evaluation
// decisions that changed: a new outcome or target for a held group) and
// fa_broker_migrations_total{outcome} (moves of manual reservations
// started, finished, failed, and kept: decided but not started). Register
// it once.
func (s *Service) Collector() prometheus.Collector {
	return &collector{
		s:              s,
		byPhase:        prometheus.NewDesc("fa_broker_reservations", "Reservations known to the broker, by phase.", []string{"phase"}, nil),
		chunksTotal:    prometheus.NewDesc("fa_broker_chunks_total", "Chunks advertised per provider and chunk type.", []string{"provider", "chunk_type"}, nil),
		chunksReserved: prometheus.NewDesc("fa_broker_chunks_reserved", "Chunks held by live reservations per provider and chunk type.", []string{"provider", "chunk_type"}, nil),
		waiters:        prometheus.NewDesc("fa_broker_longpoll_waiters", "Instruction long-poll calls currently waiting.", nil, nil),
		pending:        prometheus.NewDesc("fa_broker_instructions_pending", "Un-enforced instructions.", nil, nil),
		reevaluations:  prometheus.NewDesc("fa_broker_reevaluations_total", "Re-evaluation decisions for a consumer's held group that changed (a new outcome or target), by policy and decision (move, keep).", []string{"policy", "decision"}, nil),
		migrations:     prometheus.NewDesc("fa_broker_migrations_total", "Moves of manual reservations to a better provider, by outcome: started, finished (target Ready, old released), failed (target failed or timed out, old kept), kept (decided but not started: budget used up or target refused).", []string{"outcome"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.byPhase, c.chunksTotal, c.chunksReserved, c.waiters, c.pending, c.reevaluations, c.migrations} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	counts := map[api.Phase]int{}
	for _, r := range s.st.reservations {
		counts[r.Phase]++
	}
	type row struct {
		provider, typ   string
		total, reserved int32
	}
	var rows []row
	for _, id := range sortedKeys(s.st.providers) {
		for typ, n := range s.st.providers[id].chunks {
			rows = append(rows, row{id, string(typ), n, s.st.reserved[ptKey{id, typ}]})
		}
	}
	pending := 0
	for _, m := range s.st.pending {
		pending += len(m)
	}
	reevals := maps.Clone(s.reevalCounts)
	moves := s.moveCountsLocked()
	s.mu.Unlock()
	for _, o := range []string{moveStarted, moveFinished, moveFailed, moveKept} {
		ch <- prometheus.MustNewConstMetric(c.migrations, prometheus.CounterValue, float64(moves[o]), o)
	}
	for k, n := range reevals {
		ch <- prometheus.MustNewConstMetric(c.reevaluations, prometheus.CounterValue, float64(n), string(k.policy), k.decision)
	}
	for _, p := range allPhases {
		ch <- prometheus.MustNewConstMetric(c.byPhase, prometheus.GaugeValue, float64(counts[p]), string(p))
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(c.chunksTotal, prometheus.GaugeValue, float64(r.total), r.provider, r.typ)
		ch <- prometheus.MustNewConstMetric(c.chunksReserved, prometheus.GaugeValue, float64(r.reserved), r.provider, r.typ)
	}
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(s.waiters.Load()))
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(pending))
}
