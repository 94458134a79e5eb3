package placement

import (
	"cmp"
	"math"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// explainer records, per chunk type, the providers a decision's walks
// read, in the order read (the policy's rank order). A nil *explainer
// records nothing: views pass nil and keep their early stops.
type explainer struct {
	order [numTypes][]*provState
	seen  [numTypes]map[string]bool
}

// meet records that a walk read ps (once per chunk type).
func (e *explainer) meet(ti int, ps *provState) {
	if e == nil || ps == nil {
		return
	}
	if e.seen[ti] == nil {
		e.seen[ti] = map[string]bool{}
	}
	if !e.seen[ti][ps.p.ID] {
		e.seen[ti][ps.p.ID] = true
		e.order[ti] = append(e.order[ti], ps)
	}
}

// Explain says why consumer consumerID grows where it does: it runs the
// decision of View (the same walks, told to read on past the winner and
// record what they read) and reports, per chunk type the federation
// offers, every provider with its metric, rank and outcome, the ones
// filtered out and why, and the margin between the winner and the
// runner-up. override, when set, replaces the consumer's heartbeated
// policy (to explain what another policy would choose).
//
// It costs O(p log p) per chunk type for p providers, unlike View's early
// stops: it is meant for dashboards and consoles, never for the Cluster
// Autoscaler's path.
func (ix *Index) Explain(consumerID string, override *api.Placement) api.PlacementExplanation {
	ix.mu.RLock()
	defer ix.mu.RUnlock()

	ex := &explainer{}
	v := ix.newViewCtx(consumerID, override, ex)
	v.decide()
	out := api.PlacementExplanation{
		ConsumerClusterID: consumerID,
		AppliedPlacement:  v.policy,
		ChunkTypes:        []api.ChunkTypeExplanation{},
		GeneratedAt:       metav1.NewTime(ix.now()),
	}
	out.Metric, out.HigherIsBetter = v.explainMetric()
	if v.scored() {
		w := v.weights
		out.Weights = &w
	}
	ids := make([]string, 0, len(ix.providers))
	for id, ps := range ix.providers {
		ids = append(ids, id)
		if sharingVerdict(ps.p.Sharing, consumerID) != usable {
			out.NotSharing++
		}
	}
	slices.Sort(ids)
	// The Standard policy's decision, for the comparison with the
	// consumer's own (the same walk, without recording).
	std := ix.newViewCtx(consumerID, &api.Placement{Type: api.PlacementStandard}, nil)
	std.decide()
	for ti := range chunkTypes {
		if te, ok := v.explainType(ti, ids); ok {
			v.alternatives(&te, ti, ids, std)
			out.ChunkTypes = append(out.ChunkTypes, te)
		}
	}
	return out
}

// explainType builds the explanation of chunk type ti after decide; ok is
// false when no provider offers the type.
func (v *viewCtx) explainType(ti int, ids []string) (api.ChunkTypeExplanation, bool) {
	te := api.ChunkTypeExplanation{ChunkType: chunkTypes[ti], BlockedBy: v.blockedBy[ti], Candidates: []api.PlacementCandidate{}}
	eligible := v.eligibleOrder(ti, ids)
	for i, ps := range eligible {
		c := v.explainCandidate(ps, ti)
		c.Rank, c.Outcome = int32(i+1), api.OutcomeEligible
		if _, ok := v.growable[groupKey{ps.p.ID, ti}]; ok {
			c.Outcome = api.OutcomeWinner
			te.Winners = append(te.Winners, ps.p.ID)
		}
		te.Candidates = append(te.Candidates, c)
	}
	offered := false
	for _, id := range ids {
		ps := v.ix.providers[id]
		offered = offered || ps.total[ti] > 0
		if c, ok := v.filteredCandidate(ps, ti); ok {
			te.Candidates = append(te.Candidates, c)
		}
	}
	if len(te.Winners) > 0 && len(eligible) > 1 && eligible[0].p.ID == te.Winners[0] {
		te.RunnerUp = eligible[1].p.ID
		if a, b := te.Candidates[0].Metric, te.Candidates[1].Metric; a != nil && b != nil {
			m := math.Abs(*b - *a)
			te.Margin = &m
		}
	}
	return te, offered
}

// eligibleOrder lists the eligible providers of chunk type ti in the order
// the walks read them; under Weighted by score (the threshold walk reads
// in several orders at once).
func (v *viewCtx) eligibleOrder(ti int, ids []string) []*provState {
	var eligible []*provState
	for _, ps := range v.ex.order[ti] {
		if v.classify(ps, ti) == usable {
			eligible = append(eligible, ps)
		}
	}
	// A Latency shortlist reads only providers with coordinates: those
	// without are the last resort, in the Standard order.
	var rest []*provState
	for _, id := range ids {
		ps := v.ix.providers[id]
		if !v.ex.seen[ti][id] && v.classify(ps, ti) == usable {
			rest = append(rest, ps)
		}
	}
	slices.SortStableFunc(rest, func(a, b *provState) int { return cmp.Compare(v.ix.standardKey(a, ti), v.ix.standardKey(b, ti)) })
	eligible = append(eligible, rest...)
	if v.scored() {
		n := v.weighted[ti]
		slices.SortStableFunc(eligible, func(a, b *provState) int {
			if c := cmp.Compare(n.score(v, a, ti), n.score(v, b, ti)); c != 0 {
				return c
			}
			return strings.Compare(a.p.ID, b.p.ID)
		})
	}
	return eligible
}

// filteredCandidate is the candidate row of a provider the consumer cannot
// grow on for chunk type ti, with its outcome and filter; ok is false for
// an eligible provider and one without chunks of the type.
func (v *viewCtx) filteredCandidate(ps *provState, ti int) (c api.PlacementCandidate, ok bool) {
	why := v.classify(ps, ti)
	if why == usable || why == noChunks {
		return c, false
	}
	c = v.explainCandidate(ps, ti)
	switch why {
	case blocking:
		c.Outcome = api.OutcomeBlocking
		c.Filter = api.FilterFull
		if v.ix.free(ps, ti) > 0 {
			c.Filter = api.FilterQuota
		}
	case stale:
		c.Outcome, c.Filter = api.OutcomeFiltered, api.FilterStale
	case denied:
		c.Outcome, c.Filter = api.OutcomeFiltered, api.FilterDenied
	case notAllowed:
		c.Outcome, c.Filter = api.OutcomeFiltered, api.FilterNotAllowed
	case quotaFull:
		c.Outcome, c.Filter = api.OutcomeFiltered, api.FilterQuota
	case full:
		c.Outcome, c.Filter = api.OutcomeFiltered, api.FilterFull
	}
	return c, true
}

// explainCandidate fills a candidate's metric and capacity (head-room only
// where the consumer may take chunks).
func (v *viewCtx) explainCandidate(ps *provState, ti int) api.PlacementCandidate {
	c := api.PlacementCandidate{ProviderClusterID: ps.p.ID, FreeChunks: v.ix.free(ps, ti), TotalChunks: ps.total[ti]}
	if v.classify(ps, ti) == usable {
		c.HeadRoom = v.headroom(ps, ti)
	}
	if m, ok := v.explainValue(ps, ti); ok {
		c.Metric = &m
	}
	return c
}

// explainMetric names the metric the consumer's policy ranks by.
func (v *viewCtx) explainMetric() (m api.ExplainMetric, higherIsBetter bool) {
	switch {
	case v.policy == api.PlacementPrice:
		return api.MetricCost, false
	case v.policy == api.PlacementEco:
		return api.MetricCarbon, false
	case v.policy == api.PlacementLatency && v.located:
		return api.MetricDistance, false
	case v.scored():
		return api.MetricWeightedScore, false
	case v.policy == api.PlacementRandom:
		return api.MetricRandomDraw, false
	}
	return api.MetricStandardScore, true
}

// explainValue is a group's value of the policy's metric: the keys the
// ranking trees and walks order by (the Standard score is 1 − its key).
func (v *viewCtx) explainValue(ps *provState, ti int) (float64, bool) {
	switch m, _ := v.explainMetric(); m {
	case api.MetricStandardScore:
		return 1 - v.ix.standardKey(ps, ti), true
	case api.MetricWeightedScore:
		return v.weighted[ti].score(v, ps, ti), true
	case api.MetricRandomDraw:
		return v.randomDraw(ps, ti), true
	}
	return v.metricOf(ps, ti)
}
