package consumer

import (
	"context"
	"maps"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// consolidationPassTimeout bounds one consolidation pass after a
// heartbeat, so a slow Kubernetes API never holds the heartbeat loop long.
const consolidationPassTimeout = 10 * time.Second

// consolidate runs one consolidation pass over the broker's "move"
// decisions of the last heartbeat, under the budget of lifecycle (the
// ConsumerPolicy's) over the agent's default.
func (a *Agent) consolidate(ctx context.Context, moves []api.Reevaluation) {
	ctx, cancel := context.WithTimeout(ctx, consolidationPassTimeout)
	defer cancel()
	in := consolidate.Inputs{Moves: moves, Budget: a.moveBudget(), VirtualNodes: a.VirtualNodes}
	in.Groups = func(ctx context.Context) ([]api.NodeGroupView, error) {
		view, err := a.cfg.Broker.NodeGroups(ctx)
		return view.NodeGroups, err
	}
	before := a.consol.Roles()
	if err := a.consol.Reconcile(ctx, in); err != nil && ctx.Err() == nil {
		a.log.Warn("Consolidation pass failed; retried after the next heartbeat", "err", err)
	}
	if !maps.Equal(before, a.consol.Roles()) {
		a.changes.Notify()
	}
}

// moveBudget is the agent's local cap on moves (--consolidation-max-moves
// per --consolidation-window), on top of the consumer's one disruption
// budget, which the broker enforces through the moves it hands out.
func (a *Agent) moveBudget() consolidate.Budget {
	b := a.cfg.Consolidation.Budget
	if b.Window <= 0 {
		b = consolidate.Budget{Max: consolidate.DefaultMaxMoves, Window: consolidate.DefaultMoveWindow}
	}
	return b
}

// Consolidations are the moves of autoscaled capacity under way.
func (a *Agent) Consolidations() []consolidate.Move { return a.consol.Moves() }
