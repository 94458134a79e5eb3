package uitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
)

// TestChoiceUI is the Choice policy as the operator sees it (issue #18):
// type an intent and pick Choice in the consumer console; with a scripted
// model (an in-test Ollama that ranks Paris first) the console says Paris,
// chosen by the model, and shows the model's reason as its account; with
// the model down and a new intent it says Montreal, the fallback's choice
// (carbon weight 1), marked as the fallback with the reason. It needs the
// real agents (the demo), not a fake or remote target.
func TestChoiceUI(t *testing.T) {
	if os.Getenv("FA_UITEST_FAKE") != "" {
		t.Skip("the Choice policy needs the real consumer agent: not on the fake federation")
	}
	if tg, err := TargetFromEnv(); err != nil || tg != nil {
		t.Skip("the Choice test starts its own demo with a scripted model; not against a remote target")
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"response": `{"ranking": ["paris", "montreal"], "reason": "Paris is the closest to London"}`, "done": true})
	}))
	defer model.Close()
	b := browser(t)
	d, err := StartDemo(context.Background(), t.TempDir(), func(o *demo.Options) {
		o.Model = choice.Endpoint{API: choice.APIOllama, URL: model.URL, Model: "scripted", Timeout: 10 * time.Second}
	})
	if err != nil {
		t.Fatalf("start the demo federation: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("demo federation: %v", err)
		}
	})
	u := &ui{t: t, expect: playwright.NewPlaywrightAssertions(30000), shots: envOr("FA_UITEST_SCREENSHOT_DIR", t.TempDir())}
	if u.shots != "-" {
		u.ok(os.MkdirAll(u.shots, 0o755), "screenshot dir")
	}
	p := newPage(u, b)
	login(u, p, d.Consumer)

	u.ok(p.Locator("[data-testid=intent]").Fill("stay close to London"), "type the intent")
	u.ok(p.Locator("[data-testid=apply-intent]").Click(), "save the intent")
	u.ok(u.expect.Locator(p.Locator("[data-testid=flash]")).ToContainText("Intent saved"), "intent saved")
	u.ok(p.Locator("[data-testid=policy-Choice]").Check(), "pick Choice")
	u.ok(p.Locator("#w_carbon").Fill("1"), "the fallback's carbon weight")
	u.ok(p.Locator("[data-testid=apply-policy]").Click(), "apply the policy")
	u.ok(u.expect.Locator(p.Locator("[data-testid=flash]")).ToContainText("Policy applied"), "policy applied")

	current := p.Locator("[data-testid=choice-current]")
	u.ok(u.expect.Locator(current).ToContainText("paris (standard)"), "the console names the model's pick")
	u.ok(u.expect.Locator(current.Locator(".badge")).ToHaveText("model"), "marked as the model's")
	u.ok(u.expect.Locator(p.Locator("[data-testid=choice-account]")).ToContainText("Paris is the closest to London"), "the model's account shown")
	u.screenshot(p, "choice-model.png")

	model.Close()
	u.ok(p.Locator("[data-testid=intent]").Fill("the greenest, please"), "type a new intent")
	u.ok(p.Locator("[data-testid=apply-intent]").Click(), "save it")
	u.ok(u.expect.Locator(current).ToContainText("montreal (standard)"), "the console names the fallback's pick")
	u.ok(u.expect.Locator(current.Locator(".badge")).ToHaveText("fallback"), "marked as the fallback")
	u.ok(u.expect.Locator(p.Locator("[data-testid=choice-why]")).ToContainText("calling the model at "+model.URL), "the console says why")
	u.ok(u.expect.Locator(p.Locator("[data-testid=choice-account]")).ToHaveCount(0), "no account of a model that did not answer")
	u.screenshot(p, "choice-fallback.png")
}
