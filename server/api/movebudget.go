package api

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// One disruption budget of moves per consumer (extension; docs/placement.md,
// "A move decision is acted on twice"): the broker's migrations of manual
// reservations and the consumer agent's consolidations of autoscaled
// capacity are counted together against lifecycle.migrations (its
// deprecated aliases maxMovesPerWindow / moveWindowSeconds when it is
// unset; else the broker's --migration-budget per --migration-window).

// Consolidation is one consolidation of autoscaled capacity the consumer
// agent started and still runs (heartbeat "consolidations"). The broker
// charges it to the consumer's budget once, the first time a heartbeat
// lists it; NodeGroupID and StartedAt identify it across heartbeats.
type Consolidation struct {
	// NodeGroupID is the worse group the capacity moves off.
	NodeGroupID string `json:"nodeGroupId"`
	// TargetNodeGroupID is the better group it moves to.
	TargetNodeGroupID string `json:"targetNodeGroupId,omitempty"`
	// StartedAt is when the agent started it (the agent's clock).
	StartedAt metav1.Time `json:"startedAt"`
}

// MaxHeartbeatConsolidations caps HeartbeatRequest.Consolidations: an agent
// runs at most one consolidation per node group, and the budget allows at
// most MaxMigrationsPerWindow moves per window.
const MaxHeartbeatConsolidations = 1000

// Check checks a consolidation: nodeGroupId a node-group id (ng-<provider>-
// <type>), targetNodeGroupId one or empty, startedAt set.
func (c *Consolidation) Check(field string) *FieldError {
	if fe := checkNodeGroupID(join(field, "nodeGroupId"), c.NodeGroupID, false); fe != nil {
		return fe
	}
	if fe := checkNodeGroupID(join(field, "targetNodeGroupId"), c.TargetNodeGroupID, true); fe != nil {
		return fe
	}
	if c.StartedAt.IsZero() {
		return fieldErr(join(field, "startedAt"), "an unset time", "the time the consolidation started (RFC 3339)")
	}
	return nil
}

// checkNodeGroupID checks a node-group id: ng-<provider cluster id>-<chunk
// type> ("" only when optional).
func checkNodeGroupID(field, id string, optional bool) *FieldError {
	if id == "" && optional {
		return nil
	}
	p, _, ok := ParseNodeGroupID(id)
	if !ok || CheckClusterID(field, p) != nil {
		return fieldErr(field, ShowString(id), "a node-group id ng-<provider cluster id>-<chunk type>")
	}
	return nil
}

// checkConsolidations checks the heartbeat's consolidations: at most
// MaxHeartbeatConsolidations, each well formed.
func checkConsolidations(field string, cs []Consolidation) *FieldError {
	if fe := CheckCount(field, len(cs), MaxHeartbeatConsolidations); fe != nil {
		return fe
	}
	for i := range cs {
		if fe := cs[i].Check(Sub(field, i)); fe != nil {
			return fe
		}
	}
	return nil
}

// Move kinds, as MoveBudgetStatus counts them.
const (
	MoveKindMigration     = "migration"
	MoveKindConsolidation = "consolidation"
)

// MoveBudgetStatus is a consumer's disruption budget of moves as the
// heartbeat answer and the overview show it: Used of Limit moves started in
// the last WindowSeconds (Migrations by the broker, Consolidations by the
// agent), plus Held slots handed out with the last heartbeat answer's moves
// and held until the consumer's next heartbeat.
type MoveBudgetStatus struct {
	Limit          int32 `json:"limit"`
	WindowSeconds  int64 `json:"windowSeconds"`
	Used           int32 `json:"used"`
	Migrations     int32 `json:"migrations"`
	Consolidations int32 `json:"consolidations"`
	Held           int32 `json:"held"`
	// Source says where Limit and WindowSeconds come from: "broker"
	// (--migration-budget, --migration-window), "migrations"
	// (lifecycle.migrations), "maxMovesPerWindow" / "moveWindowSeconds"
	// (the deprecated aliases); when they differ, Limit's source then
	// WindowSeconds', joined by "+", e.g. "migrations+broker".
	Source string `json:"source"`
	// NextAt is when the oldest counted move leaves the window (absent when
	// none is counted).
	NextAt *metav1.Time `json:"nextAt,omitempty"`
}

// Summary is the status in words, e.g. "1 of 2 moves per 1h0m0s used (0
// migrations, 1 consolidations), 1 held".
func (b *MoveBudgetStatus) Summary() string {
	if b == nil {
		return ""
	}
	return strconv.Itoa(int(b.Used)) + " of " + strconv.Itoa(int(b.Limit)) + " moves per " + (time.Duration(b.WindowSeconds) * time.Second).String() + " used (" +
		strconv.Itoa(int(b.Migrations)) + " migrations, " + strconv.Itoa(int(b.Consolidations)) + " consolidations), " + strconv.Itoa(int(b.Held)) + " held"
}
