package choiceeval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
)

// TestMeasure pins the catalogue's ranks (hand-computed from Catalogue:
// cost per standard chunk = 2 × cpu + 4 × memory price; distances from
// Turin).
func TestMeasure(t *testing.T) {
	m := Measure(Catalogue())
	for _, c := range []struct {
		what string
		got  any
		want any
	}{
		{"greenest", m.CarbonRank["montreal"], 1},
		{"second greenest", m.CarbonRank["zurich"], 2},
		{"cheapest (0.0276)", m.PriceRank["mumbai"], 1},
		{"second cheapest (0.048)", m.PriceRank["frankfurt"], 2},
		{"dearest (0.086)", m.PriceRank["zurich"], 9},
		{"nearest", m.DistanceRank["milan"], 1},
		{"second nearest", m.DistanceRank["zurich"], 2},
		{"farthest (Mumbai, 6 300 km)", m.DistanceRank["mumbai"], 9},
		{"worst carbon quartile", len(m.WorstCarbon), 3},
		{"milan is worst-quartile carbon", m.WorstCarbon["milan"], true},
		{"worst price quartile", m.WorstPrice["zurich"] && m.WorstPrice["london"] && m.WorstPrice["paris"], true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	// The passing sets docs/placement.md lists.
	for _, sc := range Scenarios() {
		var pass []string
		for _, site := range Catalogue() {
			if sc.Pass(m, site.ID) {
				pass = append(pass, site.ID)
			}
		}
		want := map[string]string{"greenest": "zurich,montreal", "close-low-emissions": "zurich", "balanced": "vienna,helsinki,montreal", "cheapest": "frankfurt,mumbai"}[sc.Name]
		if got := strings.Join(pass, ","); got != want {
			t.Errorf("%s passes %s, want %s", sc.Name, got, want)
		}
	}
	// The Choice view lists all nine, each with carbon and a score.
	v := View(Catalogue())
	if len(v.NodeGroups) != 9 {
		t.Fatalf("view has %d groups", len(v.NodeGroups))
	}
	for _, g := range v.NodeGroups {
		if g.CarbonIntensity == nil || !g.HasMetric || g.MaxSize == 0 || g.Topology == nil {
			t.Errorf("group %s lacks what the model needs: %+v", g.ID, g)
		}
	}
}

// TestRunScoresByCriteria runs the evaluation against a scripted model:
// greenest → montreal (passes), close → milan (nearest but a worst-quartile
// emitter: fails), balanced → prose (fallback: fails), cheapest → mumbai
// (passes).
func TestRunScoresByCriteria(t *testing.T) {
	answers := map[string]string{
		"greenest": `{"ranking": ["montreal", "zurich"], "reason": "hydro"}`,
		"Close":    `{"ranking": ["milan"], "reason": "nearest"}`,
		"balanced": `I would pick vienna.`,
		"Cheapest": `{"ranking": ["mumbai"]}`,
	}
	intentRE := regexp.MustCompile(`Operator's request: "([^"]*)"`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Prompt string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		m := intentRE.FindStringSubmatch(req.Prompt)
		text := `{"ranking": []}`
		for k, a := range answers {
			if m != nil && strings.Contains(m[1], k) {
				text = a
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"response": text})
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), choice.Endpoint{API: choice.APIOllama, URL: srv.URL, Model: "scripted"}, srv.Client(), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		pick    string
		byModel bool
		pass    bool
	}{
		"greenest": {"montreal", true, true}, "close-low-emissions": {"milan", true, false},
		"balanced": {"", false, false}, "cheapest": {"mumbai", true, true},
	}
	if len(rep.Outcomes) != 8 {
		t.Fatalf("%d outcomes, want 4 scenarios × 2 runs", len(rep.Outcomes))
	}
	for _, o := range rep.Outcomes {
		w := want[o.Scenario]
		if o.ByModel != w.byModel || o.Pass != w.pass || (w.byModel && o.Pick != w.pick) {
			t.Errorf("%s: %+v, want %+v", o.Scenario, o, w)
		}
	}
	rates := rep.Rates()
	if all := rates[len(rates)-1]; all != (Rate{Name: "all", Passed: 4, Fallback: 2, Run: 8}) {
		t.Errorf("total = %+v", all)
	}
	var out bytes.Buffer
	if err := Print(&out, rep); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`all\s+4\s+8\s+50%\s+2`).Match(out.Bytes()) {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestRunNeedsAModel(t *testing.T) {
	if _, err := Run(context.Background(), choice.Endpoint{}, nil, 1); err == nil || !strings.Contains(err.Error(), "--model-url") {
		t.Errorf("err = %v", err)
	}
}
