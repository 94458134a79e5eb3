package web

import (
	"fmt"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/spend"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// budgetSummary is a consumer's budget in a few words and its badge class:
// "budget 82 % used" (ok below the warning threshold, warn from it) or
// "budget reached: scale-up refused" (bad). Empty without a budget.
func budgetSummary(b *api.BudgetStatus) (text, class string) {
	if b == nil {
		return "", ""
	}
	switch b.State {
	case api.BudgetReached:
		return "budget reached: scale-up refused", "bad"
	case api.BudgetWarning:
		return fmt.Sprintf("budget %.0f %% used", b.UsedPercent), "warn"
	}
	return fmt.Sprintf("budget %.0f %% used", b.UsedPercent), "ok"
}

// budgetPanel is the consumer console's budget panel: the limits, the
// spend against them and the last refusal (the agent's own when it has
// one: it saw the refusal of its own request; else the broker's). Nil
// without a budget.
func budgetPanel(now time.Time, b *api.BudgetStatus, refusal string, refusedAt time.Time, cur string) *views.BudgetPanel {
	if b == nil {
		return nil
	}
	p := &views.BudgetPanel{}
	p.Summary, p.Class = budgetSummary(b)
	if b.PerHour != nil {
		p.Facts = append(p.Facts, views.KV{Label: "Per hour", Value: fmt.Sprintf("%s of %s (%.0f %%)", perHour(cur, b.CostPerHour), perHour(cur, *b.PerHour), spend.Share(b.CostPerHour, *b.PerHour))})
	}
	if b.PerMonth != nil {
		p.Facts = append(p.Facts, views.KV{Label: "This month", Value: fmt.Sprintf("spent %s %s; projected %s of %s %s (%.0f %%)",
			money(b.SpentThisMonth), cur, money(b.ProjectedMonth), money(*b.PerMonth), cur, spend.Share(b.ProjectedMonth, *b.PerMonth))})
	}
	p.Facts = append(p.Facts, views.KV{Label: "Warning at", Value: fmt.Sprintf("%d %%", b.WarnAtPercent)})
	if refusal == "" && b.LastRefusal != "" {
		refusal = b.LastRefusal
		if b.LastRefusalAt != nil {
			refusedAt = b.LastRefusalAt.Time
		}
	}
	if refusal != "" {
		p.Refusal, p.RefusedAgo = refusal, ago(now, refusedAt)
	}
	return p
}

// budgetEvents are the consumers' budget warnings and refusals for the
// events log: one warning per consumer and month (its time the first
// sample that saw it), one event per refusal.
func budgetEvents(now time.Time, cs []api.OverviewConsumer) []event {
	var out []event
	for _, c := range cs {
		b := c.Budget
		if b == nil {
			continue
		}
		if b.State != api.BudgetOK {
			text, class := budgetSummary(b)
			out = append(out, event{
				key: "budget/" + c.ClusterID + "/" + string(b.State) + "/" + now.UTC().Format("2006-01"), at: now, firstSeen: true,
				kind: "budget " + string(b.State), class: class, consumer: c.ClusterID, text: text,
			})
		}
		if b.LastRefusal != "" && b.LastRefusalAt != nil {
			out = append(out, event{
				key: "budget-refusal/" + c.ClusterID + "/" + b.LastRefusalAt.UTC().Format(time.RFC3339Nano), at: b.LastRefusalAt.Time,
				kind: "scale-up refused", class: "bad", consumer: c.ClusterID, text: b.LastRefusal,
			})
		}
	}
	return out
}
