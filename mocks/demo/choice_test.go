package demo_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
)

// choiceCurrentRE is the consumer console's current-choice line.
var choiceCurrentRE = regexp.MustCompile(`(?s)data-testid="choice-current">(.*?)</p>`)

// TestChoiceScenario: under the Choice policy with a scripted model (an
// in-test Ollama that ranks Paris first: neither the cheapest, Sydney, nor
// the greenest, Montreal) the workload grows on Paris, and the console
// says the model chose it; with the model down (its server closed) and a
// new intent, the fallback (Weighted, carbon weight 1: Montreal) takes
// over, marked as the fallback in the console.
func TestChoiceScenario(t *testing.T) {
	var calls atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/api/generate" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"response": `{"ranking": ["paris", "montreal"], "reason": "Paris is closest to London"}`, "done": true})
	}))
	defer model.Close()

	fed := startDemo(t, demo.DefaultProviders(3), func(o *demo.Options) {
		o.Model = choice.Endpoint{API: choice.APIOllama, URL: model.URL, Model: "scripted", Timeout: 10 * time.Second}
	})
	d := newDriver(t, fed)
	d.eventually("three providers advertised", 30*time.Second, func() (bool, string) {
		o := d.overview()
		return len(o.Advertisements) == 3, fmt.Sprintf("%d advertisements", len(o.Advertisements))
	})
	page := func() []byte {
		t.Helper()
		resp, err := d.http.Get(fed.Consumer.ConsoleURL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return body
	}
	current := func() string {
		t.Helper()
		m := choiceCurrentRE.FindSubmatch(page())
		if m == nil {
			return "no current-choice line on the console"
		}
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(string(m[1]), " ")), " ")
	}

	d.post("/intent", url.Values{"intent": {"stay close to London"}})
	d.policy("Choice", map[string]string{"w_carbon": "1"})
	d.workload(true, 6)
	d.runningOn(6, map[string]int{"paris": 2})
	if got := current(); got != "Now growing on paris (standard) model" {
		t.Errorf("console's current choice = %q, want paris chosen by the model", got)
	}
	if n := calls.Load(); n < 1 {
		t.Errorf("the model was called %d times", n)
	}
	d.off()

	// The model goes down; a new intent makes the agent ask again.
	model.Close()
	d.post("/intent", url.Values{"intent": {"the greenest, please"}})
	d.workload(true, 6)
	d.runningOn(6, map[string]int{"montreal": 2})
	d.eventually("the console marks the fallback", 30*time.Second, func() (bool, string) {
		got := current()
		return got == "Now growing on montreal (standard) fallback", got
	})
	if body := page(); !strings.Contains(string(body), "Fallback because calling the model at "+model.URL) {
		t.Errorf("the console does not say why it fell back:\n%s", choiceCurrentRE.Find(body))
	}
	d.off()
}
