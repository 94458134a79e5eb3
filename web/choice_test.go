package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

// choiceBackend adds the intent and a Choice audit log to the fake
// consumer.
type choiceBackend struct {
	web.ConsumerBackend
	intent    string
	decisions []web.ChoiceDecision
}

func (b *choiceBackend) SetIntent(_ context.Context, s string) error { b.intent = s; return nil }

func (b *choiceBackend) Status(ctx context.Context) (web.ConsumerStatus, error) {
	st, err := b.ConsumerBackend.Status(ctx)
	st.AppliedPlacement, st.Intent, st.Decisions = api.PlacementChoice, b.intent, b.decisions
	return st, err
}

// TestConsumerChoicePanel: the intent box writes through the backend with
// the selector's rule; the decisions panel marks a fallback as such and
// shows the model's reason as its account.
func TestConsumerChoicePanel(t *testing.T) {
	be := &choiceBackend{ConsumerBackend: webfake.New(nil).Consumer()}
	tok, err := auth.NewStaticToken(testToken)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := web.NewConsumerConsole(be, web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserSim{t: t, app: cc.App()}
	csrf := b.login(testToken)

	_, page := b.do(http.MethodGet, "/", nil)
	for _, want := range []string{`data-testid="intent"`, `data-testid="policy-Choice"`, "no decision yet"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	resp, _ := b.do(http.MethodPost, "/intent", url.Values{auth.CSRFField: {csrf}, "intent": {"  prioritise the greenest provider\r\nlatency is secondary "}})
	if resp.StatusCode != http.StatusSeeOther || be.intent != "prioritise the greenest provider\nlatency is secondary" {
		t.Fatalf("intent: %d, stored %q", resp.StatusCode, be.intent)
	}
	resp, page = b.do(http.MethodPost, "/intent", url.Values{auth.CSRFField: {csrf}, "intent": {"beep\a"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "Intent: the intent contains control characters") || be.intent == "beep\a" {
		t.Fatalf("bad intent: %d, stored %q", resp.StatusCode, be.intent)
	}
	resp, _ = b.do(http.MethodPost, "/intent", url.Values{auth.CSRFField: {csrf}, "intent": {strings.Repeat("x", 1001)}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("long intent: %d", resp.StatusCode)
	}

	now := time.Now()
	be.decisions = []web.ChoiceDecision{
		{At: now, Model: "Ollama tiny at http://127.0.0.1:11434", Fallback: true, Why: "the model endpoint answered 500 Internal Server Error: oom",
			Picks: []web.ChoicePick{{ChunkType: api.ChunkStandard, Provider: "milan"}}, Prompt: "PROMPT", RawAnswer: "oom"},
		{At: now.Add(-time.Minute), Reason: "zurich runs on hydro <b>", Ranking: []string{"zurich"}, Rejected: []string{"mumbai: not in the broker's list"},
			Picks: []web.ChoicePick{{ChunkType: api.ChunkStandard, Provider: "zurich", ByModel: true}}, Latency: 1500 * time.Millisecond},
	}
	_, page = b.do(http.MethodGet, "/", nil)
	for _, want := range []string{
		`Now growing on <strong class="mono">milan (standard)</strong>`, `<span class="badge warn">fallback</span>`,
		"Fallback because the model endpoint answered 500 Internal Server Error: oom.",
		"model&#39;s account: zurich runs on hydro &lt;b&gt;", "1500 ms", "mumbai: not in the broker&#39;s list", "PROMPT",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The model's pick now: its reason is shown as its account.
	be.decisions = be.decisions[1:]
	_, page = b.do(http.MethodGet, "/", nil)
	for _, want := range []string{`<span class="badge ok">model</span>`, "The model's account (what it says, not proof): <q>zurich runs on hydro &lt;b&gt;</q>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
