package demo_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// budget sets the consumer's spend budget per hour and its warning
// threshold in its ConsumerPolicy (the one the console writes) through the
// consumer cluster's Kubernetes API.
func (d *driver) budget(perHour string, warnAtPercent int) {
	d.t.Helper()
	dyn, err := dynamic.NewForConfig(d.fed.Consumer.Cluster.RESTConfig())
	if err != nil {
		d.t.Fatal(err)
	}
	gvr := fav1alpha1.GroupVersion.WithResource("consumerpolicies")
	patch := fmt.Sprintf(`{"spec":{"budget":{"perHour":%q,"warnAtPercent":%d}}}`, perHour, warnAtPercent)
	if _, err := dyn.Resource(gvr).Namespace(d.fed.Consumer.Namespace).Patch(context.Background(), "default", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		d.t.Fatalf("setting the ConsumerPolicy's budget: %v", err)
	}
}

// consolePage is the consumer console's page as its browser gets it.
func (d *driver) consolePage() string {
	d.t.Helper()
	resp, err := d.http.Get(d.fed.Consumer.ConsoleURL + "/")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// consumerBudget is the consumer's budget in the broker's overview.
func (d *driver) consumerBudget() *api.BudgetStatus {
	for _, c := range d.overview().Consumers {
		if c.ClusterID == demo.ConsumerID {
			return c.Budget
		}
	}
	return nil
}

// TestBudgetStopsScaleUp: a budget per hour of one and a half of Sydney's
// chunks (the cheapest, read from the broker's overview) lets the Cluster
// Autoscaler borrow one chunk for the six pods and no second one: two pods
// stay Pending, the consumer console says "budget reached: scale-up
// refused" with the broker's reason, and so does the broker's overview.
// Raising the budget to three and a half chunks lets the scale-up finish,
// at 57 % of the new budget: past its warning threshold of 50 %, with room
// for one chunk more.
func TestBudgetStopsScaleUp(t *testing.T) {
	fed := startDemo(t, demo.DefaultProviders(3), nil)
	d := newDriver(t, fed)
	var cost float64
	d.eventually("three providers advertised, sydney priced", 30*time.Second, func() (bool, string) {
		o := d.overview()
		for _, a := range o.Advertisements {
			if a.ClusterID == "sydney" {
				cost = a.CostPerChunk
			}
		}
		return len(o.Advertisements) == 3 && cost > 0, fmt.Sprintf("%d advertisements, sydney's chunk %v per hour", len(o.Advertisements), cost)
	})
	d.policy("Price", nil) // writes the ConsumerPolicy "default"
	d.budget(fmt.Sprintf("%.6f", 1.5*cost), 80)
	d.eventually("the broker has the budget", 30*time.Second, func() (bool, string) {
		b := d.consumerBudget()
		return b != nil && b.PerHour != nil, fmt.Sprintf("budget %+v", b)
	})

	d.workload(true, 6)
	d.eventually("one chunk on sydney, two pods Pending, the budget reached with its reason on the console and the broker", 60*time.Second, func() (bool, string) {
		run, other := d.pods()
		vn, live := d.virtualNodes(), d.live()
		b := d.consumerBudget()
		page := d.consolePage()
		onConsole := strings.Contains(page, "budget reached: scale-up refused") && strings.Contains(page, "Last refusal") &&
			strings.Contains(page, "spec.budget.perHour of its ConsumerPolicy")
		reached := b != nil && b.State == api.BudgetReached && strings.Contains(b.LastRefusal, "above its budget of")
		state := fmt.Sprintf("pods running=%d other=%d, virtual nodes %v, live %v, broker budget %+v, console shows it: %v", run, other, vn, live, b, onConsole)
		return run == 4 && other == 2 && equal(vn, map[string]int{"sydney": 1}) && equal(live, vn) && reached && onConsole, state
	})
	for _, r := range d.overview().Reservations {
		if r.ConsumerClusterID == demo.ConsumerID && r.Status == api.PhaseFailed {
			t.Errorf("reservation %s failed (%s): the budget must stop the scale-up before a reservation", r.ReservationID, r.Message)
		}
	}

	d.budget(fmt.Sprintf("%.6f", 3.5*cost), 50)
	d.runningOn(6, map[string]int{"sydney": 2})
	d.eventually("57 % of the new budget on the console, past its warning at 50 %", 30*time.Second, func() (bool, string) {
		b := d.consumerBudget()
		page := d.consolePage()
		return strings.Contains(page, "budget 57 % used") && !strings.Contains(page, "budget reached: scale-up refused") && b != nil && b.State == api.BudgetWarning,
			fmt.Sprintf("broker budget %+v", b)
	})
	d.off()
}
