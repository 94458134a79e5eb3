package views

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

func render(t *testing.T, c templ.Component) *html.Node {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func byTestID(doc *html.Node, id string) *html.Node {
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if v, ok := attr(n, "data-testid"); ok && v == id && found == nil {
			found = n
		}
	})
	return found
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return strings.Join(strings.Fields(b.String()), " ")
}

// checkPage asserts what the CSP and accessibility need: no inline script,
// style or event handler; every form control labelled; CSRF on every POST.
func checkPage(t *testing.T, doc *html.Node, csrf string) {
	t.Helper()
	labels := map[string]bool{}
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "label" {
			if f, ok := attr(n, "for"); ok {
				labels[f] = true
			}
		}
	})
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if n.Data == "script" {
			if _, ok := attr(n, "src"); !ok || n.FirstChild != nil {
				t.Errorf("inline script found")
			}
		}
		for _, a := range n.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s %s=…> breaks the CSP", n.Data, a.Key)
			}
		}
		switch n.Data {
		case "input", "select", "textarea":
			if typ, _ := attr(n, "type"); typ == "hidden" || typ == "checkbox" || typ == "radio" {
				id, _ := attr(n, "id")
				if typ != "hidden" && (n.Parent == nil || n.Parent.Data != "label") && !labels[id] {
					t.Errorf("%s input neither wrapped in a label nor named by a <label for>", typ)
				}
				return
			}
			id, _ := attr(n, "id")
			if !labels[id] {
				t.Errorf("<%s id=%q> has no <label for>", n.Data, id)
			}
		case "form":
			if m, _ := attr(n, "method"); m != "post" {
				return
			}
			has := false
			walk(n, func(c *html.Node) {
				if name, _ := attr(c, "name"); name == "_csrf" {
					v, _ := attr(c, "value")
					has = v == csrf
				}
			})
			if !has {
				action, _ := attr(n, "action")
				t.Errorf("form %s lacks the CSRF field", action)
			}
		}
	})
}

func TestDashboardLiveRenders(t *testing.T) {
	d := Dashboard{
		GeneratedAt:  "08:00:00",
		Providers:    []ProviderRow{{ID: "paris", Price: "0.0520", Renewable: true, Health: "ok", HealthLabel: "available"}},
		Consumers:    []ConsumerRow{{ID: "rome", Policy: "Price"}},
		Reservations: []ReservationRow{{ID: "res-1", Phase: "Peered", Timeline: []Step{{Phase: "Pending"}, {Phase: "Peered", Current: true}}}},
		Ranges: []ChartRange{{ID: "1h", Label: "1 hour", Default: true, Charts: []Chart{{ID: "price", Title: "Price", Width: 420, Height: 180,
			Lines: []Polyline{{Name: "paris", Color: "#1f6feb", Points: "0,0 1,1", Hover: []HoverPoint{{X: "0", Y: "0", Title: "paris: 0.0520 EUR/h at 08:00:00"}}}}}}}},
		Why: []Why{{Consumer: "rome", Policy: "Policy Price", Metric: "Cost per chunk", Types: []WhyType{{Type: "standard", Summary: "paris wins",
			Rows: []WhyRow{{Rank: "1", Provider: "paris", Metric: "0.0520 EUR/h", Outcome: "winner", Class: "ok"}}}}}},
		Events: []EventRow{{At: "08:00:00", Kind: "reservation Released", Consumer: "rome", Provider: "paris", Subject: "res-0"}},
		Totals: []TotalsRow{{Consumer: "federation", Federation: true, Rate: "0.0520 EUR/h"}},
	}
	doc := render(t, DashboardPage(Page{Title: "t", Heading: "Dashboard", WSPath: "/ws"}, d))
	checkPage(t, doc, "")
	if got := text(byTestID(doc, "price-paris")); got != "0.0520" {
		t.Fatalf("price cell %q", got)
	}
	if byTestID(doc, "conn-state") == nil {
		t.Fatal("no connection state indicator")
	}
	if !strings.Contains(text(byTestID(doc, "reservations")), "Pending") {
		t.Fatal("timeline not rendered")
	}
	if byTestID(doc, "chart-price") == nil {
		t.Fatal("chart not rendered")
	}
	if !strings.Contains(text(byTestID(doc, "chart-price")), "paris: 0.0520 EUR/h at 08:00:00") {
		t.Fatal("hover value not rendered")
	}
	if !strings.Contains(text(byTestID(doc, "why-rome-standard")), "0.0520 EUR/h") || byTestID(doc, "events") == nil || text(byTestID(doc, "spend-federation")) != "0.0520 EUR/h" {
		t.Fatal("why, events or totals not rendered")
	}
	// Each live part is one element with an id of its own, the one the
	// client swaps, and the page has every one of them (a part missing
	// from the page would never be shown).
	page := render(t, DashboardPage(Page{Title: "t"}, d))
	seen := map[string]bool{}
	for _, part := range DashboardLiveParts(d) {
		var buf bytes.Buffer
		if err := part.Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		nodes, err := html.ParseFragment(&buf, &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range nodes {
			id, _ := attr(n, "id")
			if n.Type != html.ElementNode || id == "" {
				t.Fatalf("a live part has a top-level node without an id: %q", buf.String())
			}
			ids = append(ids, id)
		}
		if len(ids) != 1 || seen[ids[0]] {
			t.Fatalf("a live part renders elements %v, want one element with an id no other part has", ids)
		}
		seen[ids[0]] = true
		found := false
		walk(page, func(n *html.Node) {
			if id, _ := attr(n, "id"); id == ids[0] {
				found = true
			}
		})
		if !found {
			t.Fatalf("the page has no #%s for the live updates to replace", ids[0])
		}
	}
}

func TestProviderPageRendersErrorsAndCSRF(t *testing.T) {
	v := ProviderConsole{
		Form: SharingForm{
			Prices: []PriceField{{Name: "price_cpu", Label: "CPU price", Value: "cheap"}},
			Caps:   []CapField{{Resource: "CPU", ModeName: "cap_mode_cpu", ValueName: "cap_value_cpu", Modes: []Option{{Value: "none", Label: "no cap", Selected: true}}}},
		},
		Errors: FieldErrors{"price_cpu": "CPU price: \"cheap\" is not a number"},
	}
	doc := render(t, ProviderPage(Page{Heading: "Provider console", CSRF: "tok", LoggedIn: true, WSPath: "/ws"}, v))
	checkPage(t, doc, "tok")
	if got := text(byTestID(doc, "err-price_cpu")); !strings.Contains(got, "is not a number") {
		t.Fatalf("field error %q", got)
	}
	if byTestID(doc, "validation-summary") == nil {
		t.Fatal("no error summary")
	}
}

func TestConsumerPageRenders(t *testing.T) {
	v := ConsumerConsole{
		CSRF:     "tok",
		Policy:   PolicyForm{Policies: []Option{{Value: "Price", Label: "Price", Selected: true}}, Weights: []WeightField{{Name: "w_price", Label: "Price weight", Value: "0"}}},
		Workload: &WorkloadForm{Enabled: true, Replicas: "4", CPU: "1", Memory: "1Gi"},
		Reserve:  ReserveForm{Providers: []Option{{Value: "paris", Label: "paris"}}, ChunkTypes: []Option{{Value: "standard", Label: "standard"}}, Count: "1"},
		Status: ConsumerStatus{
			Reservations: []ConsumerReservationRow{{ID: "res-1", Releasable: true, Phase: "Peered"}},
			Nodes:        []NodeRow{{Name: "vk-1", State: "Ready", StateClass: "ok"}},
		},
	}
	doc := render(t, ConsumerPage(Page{Heading: "Consumer console", CSRF: "tok", LoggedIn: true, WSPath: "/ws"}, v))
	checkPage(t, doc, "tok")
	if !strings.Contains(text(byTestID(doc, "nodes")), "Ready") {
		t.Fatal("virtual node state missing")
	}
	if byTestID(doc, "no-totals") == nil {
		t.Fatal("a console without totals does not say so")
	}
	v.Status.Totals = &TotalsRow{Consumer: "rome", Rate: "0.2320 EUR/h", Today: "1.1600 EUR"}
	doc = render(t, ConsumerPage(Page{Heading: "Consumer console", CSRF: "tok", LoggedIn: true, WSPath: "/ws"}, v))
	if got := text(byTestID(doc, "spend-rome")); got != "0.2320 EUR/h" {
		t.Fatalf("the console's spend reads %q, want 0.2320 EUR/h", got)
	}
	// Broadcast fragments carry an empty CSRF value that live.js fills in.
	frag := render(t, ConsumerReservations(v.Status, "", ""))
	walk(frag, func(n *html.Node) {
		if name, _ := attr(n, "name"); name == "_csrf" {
			if val, _ := attr(n, "value"); val != "" {
				t.Fatalf("a broadcast fragment carries a CSRF token")
			}
		}
	})
}

// Every empty table's placeholder row spans all its columns: the
// dashboard's, both consoles' (with and without a consumer column or a
// chunk-size column).
func TestEmptyTablesSpanTheirColumns(t *testing.T) {
	pages := map[string]templ.Component{
		"dashboard":        DashboardPage(Page{Title: "t", WSPath: "/ws"}, Dashboard{Why: []Why{{Consumer: "rome", Types: []WhyType{{Type: "standard"}}}}}),
		"provider console": ProviderPage(Page{CSRF: "tok", LoggedIn: true, WSPath: "/ws"}, ProviderConsole{}),
		"consumer console": ConsumerPage(Page{CSRF: "tok", LoggedIn: true, WSPath: "/ws"}, ConsumerConsole{Status: ConsumerStatus{Choice: &ChoicePanel{}}}),
	}
	for name, c := range pages {
		doc := render(t, c)
		tables := 0
		walk(doc, func(n *html.Node) {
			if n.Type != html.ElementNode || n.Data != "table" {
				return
			}
			cols, span := 0, ""
			walk(n, func(c *html.Node) {
				if c.Type != html.ElementNode {
					return
				}
				if c.Data == "th" {
					cols++
				}
				if cls, _ := attr(c, "class"); c.Data == "td" && cls == "empty" {
					span, _ = attr(c, "colspan")
				}
			})
			if span == "" {
				return
			}
			tables++
			id, _ := attr(n, "data-testid")
			if span != strconv.Itoa(cols) {
				t.Errorf("%s: the empty row of table %q spans %s columns of %d", name, id, span, cols)
			}
		})
		if tables == 0 {
			t.Errorf("%s: no empty table rendered", name)
		}
	}
}

// A filtered candidate's outcome and its reason read as two words
// ("filtered denies this cluster"), not "filtereddenies".
func TestWhyReasonIsSeparated(t *testing.T) {
	w := Why{Consumer: "rome", Types: []WhyType{{Type: "standard", Rows: []WhyRow{{Provider: "paris", Outcome: "filtered", Class: "bad", Reason: "denies this cluster"}}}}}
	doc := render(t, WhyPanel([]Why{w}))
	var cell string
	walk(byTestID(doc, "why-rome-standard"), func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "td" && strings.Contains(rawText(n), "denies") {
			cell = rawText(n)
		}
	})
	if strings.TrimSpace(cell) != "filtered denies this cluster" {
		t.Fatalf("the outcome cell reads %q, want \"filtered denies this cluster\"", cell)
	}
}

// rawText is n's text as the browser's textContent has it (white space
// kept).
func rawText(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}
