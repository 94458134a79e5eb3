package web

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestBudgetOnTheDashboard: the consumers table says "budget 82 % used" or
// "budget reached: scale-up refused"; the events log has one warning per
// consumer and month, at the first sample that saw it, and one event per
// refusal with the broker's reason.
func TestBudgetOnTheDashboard(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	refusedAt := metav1.NewTime(t0.Add(90 * time.Second))
	ov := func(at time.Time, b *api.BudgetStatus) api.Overview {
		return api.Overview{GeneratedAt: metav1.NewTime(at), Consumers: []api.OverviewConsumer{{ClusterID: "lyon", Budget: b}, {ClusterID: "free"}}}
	}
	warn := &api.BudgetStatus{UsedPercent: 81.6, State: api.BudgetWarning}
	reached := &api.BudgetStatus{UsedPercent: 85, State: api.BudgetReached, LastRefusal: "budget reached: lyon spends 2 per hour", LastRefusalAt: &refusedAt}

	vm := buildDashboard(t0, ov(t0, warn), newHistory(time.Hour, 5*time.Second), time.Minute, "EUR")
	rows := map[string][2]string{}
	for _, r := range vm.Consumers {
		rows[r.ID] = [2]string{r.Budget, r.BudgetClass}
	}
	if rows["lyon"] != [2]string{"budget 82 % used", "warn"} || rows["free"] != [2]string{"", ""} {
		t.Fatalf("consumer rows %v", rows)
	}
	if got, _ := budgetSummary(reached); got != "budget reached: scale-up refused" {
		t.Fatalf("reached: %q", got)
	}

	log := newEventLog(MaxEvents)
	log.record(ov(t0, warn))
	log.record(ov(t0.Add(time.Minute), warn))
	log.record(ov(t0.Add(2*time.Minute), reached))
	var got []string
	for _, e := range log.snapshot() {
		got = append(got, e.at.Format("15:04:05")+" "+e.kind+" "+e.consumer+": "+e.text)
	}
	want := []string{
		"13:02:00 budget reached lyon: budget reached: scale-up refused",
		"13:01:30 scale-up refused lyon: budget reached: lyon spends 2 per hour",
		"13:00:00 budget warning lyon: budget 82 % used",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
