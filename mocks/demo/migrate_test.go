package demo_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// readyNodes counts the consumer's Ready virtual nodes per provider.
func (d *driver) readyNodes(ctx context.Context) (map[string]int, error) {
	nodes, err := d.consumer.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: liqo.TypeLabel + "=" + liqo.VirtualNodeType})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.DeletionTimestamp == nil {
				out[n.Labels[liqo.RemoteClusterIDLabel]]++
			}
		}
	}
	return out, nil
}

// watchReady samples the consumer's Ready virtual nodes (all providers)
// until the test ends; the returned func gives the fewest seen (-1 when a
// listing failed).
func (d *driver) watchReady() func() int {
	return d.watchFewest(50*time.Millisecond, func(ctx context.Context) (int, error) {
		byProvider, err := d.readyNodes(ctx)
		n := 0
		for _, v := range byProvider {
			n += v
		}
		return n, err
	})
}

// providerConsole logs in to provider id's console and returns a poster of
// its forms.
func (d *driver) providerConsole(id string) func(path string, form url.Values) {
	d.t.Helper()
	p := d.fed.Provider(id)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: driverTimeout}
	resp, err := c.PostForm(p.ConsoleURL+"/login", url.Values{"token": {d.fed.ConsoleToken}})
	if err != nil {
		d.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return func(path string, form url.Values) {
		d.t.Helper()
		d.postTo(c, p.ConsoleURL, path, form)
	}
}

// consumerRow is the consumer's row of the broker's overview.
func (d *driver) consumerRow() api.OverviewConsumer {
	for _, c := range d.overview().Consumers {
		if c.ClusterID == demo.ConsumerID {
			return c
		}
	}
	return api.OverviewConsumer{}
}

// page fetches url with the driver's session and returns its body.
func (d *driver) page(u string) string {
	d.t.Helper()
	resp, err := d.http.Get(u)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func near(a *float64, want float64) bool { return a != nil && math.Abs(*a-want) < 1e-9 }

// TestMigrationScenario: London (Price) reserves one chunk by hand on
// Sydney, the cheapest (2 × 0.020 + 4 × 0.002 = 0.048 per hour; Montreal
// 0.086). Sydney's owner raises the price to 0.094 (2 × 0.039 + 4 ×
// 0.004): Montreal is better by only 0.008, not more than the threshold of
// 0.01, so the reservation stays. Then to 0.12 (2 × 0.050 + 4 × 0.005): a
// saving of 0.034, so the broker moves it — the new reservation on
// Montreal first, the old one released once the new virtual node is
// Ready — and the consumer never holds fewer Ready virtual nodes than the
// one it had. The saving is summed on the overview, the dashboard, the
// consumer console and the metrics.
func TestMigrationScenario(t *testing.T) {
	fed := startDemo(t, demo.DefaultProviders(2), nil)
	d := newDriver(t, fed)
	d.eventually("two providers advertised", 30*time.Second, func() (bool, string) {
		o := d.overview()
		return len(o.Advertisements) == 2, fmt.Sprintf("%d advertisements", len(o.Advertisements))
	})
	d.policy("Price", nil)
	d.post("/reservations", url.Values{"provider": {"sydney"}, "chunk_type": {"standard"}, "count": {"1"}})
	d.eventually("the manual chunk Ready on sydney", 60*time.Second, func() (bool, string) {
		ready, err := d.readyNodes(context.Background())
		return err == nil && equal(ready, map[string]int{"sydney": 1}), fmt.Sprintf("ready virtual nodes %v (%v)", ready, err)
	})
	manual := d.liveIDs("sydney")
	if len(manual) != 1 || api.IsManualReservation(manual[0]) == false {
		t.Fatalf("live reservations on sydney %v, want one manual", manual)
	}
	fewest := d.watchReady()
	sydney := d.providerConsole("sydney")

	t.Run("saving below the threshold: stays", func(t *testing.T) {
		d.t = t
		sydney("/sharing", url.Values{"price_cpu": {"0.039"}, "price_memory": {"0.004"}, "cap_mode_cpu": {"none"}, "cap_mode_memory": {"none"}, "cap_mode_gpu": {"none"}})
		d.eventually("the re-evaluation at sydney's new price: keep", 30*time.Second, func() (bool, string) {
			for _, r := range d.consumerRow().Reevaluations {
				if r.NodeGroupID == "ng-sydney-standard" {
					return near(r.Current, 0.094) && r.Decision == api.DecisionKeep && r.Target == "montreal", fmt.Sprintf("%+v", r)
				}
			}
			return false, "no decision for ng-sydney-standard"
		})
		// A keep decision starts no move: nothing moved, nothing kept.
		if ms := d.consumerRow().Migrations; len(ms) != 0 {
			t.Fatalf("migrations %+v after a keep decision, want none", ms)
		}
		if ids := d.liveIDs("sydney"); len(ids) != 1 || ids[0] != manual[0] {
			t.Fatalf("live on sydney %v, want %v kept", ids, manual)
		}
	})
	t.Run("saving beats the threshold: moves", func(t *testing.T) {
		d.t = t
		sydney("/sharing", url.Values{"price_cpu": {"0.050"}, "price_memory": {"0.005"}, "cap_mode_cpu": {"none"}, "cap_mode_memory": {"none"}, "cap_mode_gpu": {"none"}})
		target := api.MigrationID(manual[0], 1)
		d.eventually("moved to montreal: the new chunk Ready there, the old one released", 90*time.Second, func() (bool, string) {
			row := d.consumerRow()
			ready, err := d.readyNodes(context.Background())
			live := d.live()
			state := fmt.Sprintf("migrations %+v, ready virtual nodes %v (%v), live %v", row.Migrations, ready, err, live)
			finished := len(row.Migrations) == 1 && row.Migrations[0].State == api.MigrationFinished && row.Migrations[0].TargetReservationID == target
			return finished && equal(ready, map[string]int{"montreal": 1}) && equal(live, map[string]int{"montreal": 1}), state
		})
		if n := fewest(); n < 1 {
			t.Errorf("the consumer's Ready virtual nodes fell to %d during the move, want never below 1", n)
		}
		if ids := d.liveIDs("montreal"); len(ids) != 1 || ids[0] != target {
			t.Errorf("live on montreal %v, want the move's target %s", ids, target)
		}
		sv := d.consumerRow().Savings
		if sv == nil || sv.Moves != 1 || math.Abs(sv.CostPerHour-0.034) > 1e-9 {
			t.Fatalf("savings %+v, want 1 move saving 0.034 per hour", sv)
		}
		d.eventually("the consumer console shows the move and the saving", 30*time.Second, func() (bool, string) {
			body := d.page(fed.Consumer.ConsoleURL + "/")
			ok := strings.Contains(body, "Saved by finished moves: 1 move(s)") && strings.Contains(body, `data-state="finished"`)
			i := strings.Index(body, "consumer-saved")
			return ok, body[max(i, 0):min(max(i, 0)+300, len(body))]
		})
		dash := d.page(fed.DashboardURL + "/")
		if !strings.Contains(dash, `data-testid="migrations"`) || !strings.Contains(dash, `data-state="finished"`) || !strings.Contains(dash, "1 move(s)") {
			t.Errorf("the dashboard shows no finished move with its saving")
		}
		metrics := d.page(fed.DashboardURL + "/metrics")
		for _, want := range []string{`fa_broker_migrations_total{outcome="started"} 1`, `fa_broker_migrations_total{outcome="finished"} 1`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
