package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

// budgetConsumer is a consumer backend whose status carries a budget and
// the agent's last refusal.
type budgetConsumer struct {
	web.ConsumerBackend
	budget  *api.BudgetStatus
	refusal string
}

func (b budgetConsumer) Status(ctx context.Context) (web.ConsumerStatus, error) {
	st, err := b.ConsumerBackend.Status(ctx)
	st.Budget, st.BudgetRefusal = b.budget, b.refusal
	if b.refusal != "" {
		st.BudgetRefusalAt = time.Now().Add(-time.Minute)
	}
	return st, err
}

// TestConsumerConsoleShowsBudget: the console shows the budget's state in
// words, the spend against each limit and the last refusal's reason (the
// agent's own, else the broker's); nothing without a budget.
func TestConsumerConsoleShowsBudget(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	at := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	brokerSays := "budget reached: the broker's words"
	cases := []struct {
		name    string
		budget  *api.BudgetStatus
		refusal string
		want    []string
		absent  []string
	}{
		{"no budget", nil, "", nil, []string{`data-testid="budget"`}},
		{"warning", &api.BudgetStatus{PerHour: f(2.5), WarnAtPercent: 80, CostPerHour: 2.05, UsedPercent: 82, UsedOf: "perHour", State: api.BudgetWarning}, "",
			[]string{"budget 82 % used", "2.0500 EUR/h of 2.5000 EUR/h (82 %)", "Warning at", "80 %"}, []string{"Last refusal"}},
		{"reached, the agent's refusal", &api.BudgetStatus{PerHour: f(2.5), PerMonth: f(460), WarnAtPercent: 80, CostPerHour: 2, SpentThisMonth: 1,
			ProjectedMonth: 459, UsedPercent: 99.8, UsedOf: "perMonth", State: api.BudgetReached, LastRefusal: brokerSays, LastRefusalAt: &at},
			`budget reached: consumer "consumer-1" spends 2 per hour now`,
			[]string{"budget reached: scale-up refused", "spent 1.0000 EUR; projected 459.0000 of 460.0000 EUR (100 %)",
				"Last refusal (1m ago): budget reached: consumer &#34;consumer-1&#34; spends 2 per hour now"}, []string{brokerSays}},
		{"reached, the broker's refusal", &api.BudgetStatus{PerHour: f(2), WarnAtPercent: 80, CostPerHour: 2, UsedPercent: 100, UsedOf: "perHour",
			State: api.BudgetReached, LastRefusal: brokerSays, LastRefusalAt: &at}, "",
			[]string{"budget reached: scale-up refused", "Last refusal (2m ago): budget reached: the broker&#39;s words"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := auth.NewStaticToken(testToken)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := web.NewConsumerConsole(budgetConsumer{webfake.New(nil).Consumer(), tc.budget, tc.refusal}, web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok, Currency: "EUR"}})
			if err != nil {
				t.Fatal(err)
			}
			b := &browserSim{t: t, app: cc.App()}
			b.login(testToken)
			resp, page := b.do(http.MethodGet, "/", nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(page, w) {
					t.Errorf("page shows %q", w)
				}
			}
		})
	}
}
