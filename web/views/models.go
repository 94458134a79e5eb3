// Package views holds the templ components of the dashboard and the consoles
// and the display-shaped view models they render. Components receive
// ready-to-print values only; web/ builds the models from backend data.
package views

import (
	"sort"
	"strconv"

	"github.com/a-h/templ"
)

// Page is the frame around every page.
type Page struct {
	Title   string
	Heading string
	// Who names the console (cluster id) in the header.
	Who string
	// Base is the path prefix of every route ("" or "/dash").
	Base string
	// WSPath is the websocket path of live updates; empty disables them.
	WSPath string
	// SessionPath answers whether the login session is alive (GET: 204 or
	// 401); the script asks it before reconnecting and before sending a
	// form. LoginPath is the login page ("" when the site has no login).
	SessionPath, LoginPath string
	// CSRF is the session's CSRF token (empty when not logged in).
	CSRF string
	// LoggedIn shows the logout button.
	LoggedIn bool
}

// Stat is one big number.
type Stat struct {
	Label string
	Value string
}

// Dashboard is the broker dashboard.
type Dashboard struct {
	GeneratedAt string
	// Now is the render's moment in Unix milliseconds: the page's script
	// counts ages against it (the browser's clock may be off).
	Now          int64
	Stats        []Stat
	ChunkTypes   []ChunkTypeRow
	Providers    []ProviderRow
	Consumers    []ConsumerRow
	Reservations []ReservationRow
	Instructions []InstructionRow
	// Ranges are the charts per time range (one is shown, picked by the
	// range radios outside the live part).
	Ranges   []ChartRange
	Legend   []LegendItem
	Warnings []string
	// Why explains each consumer's placement (empty when the broker
	// offers no explanations).
	Why []Why
	// Events is the events log, newest first; EventConsumers and
	// EventProviders are the names it mentions (filter suggestions).
	Events         []EventRow
	EventConsumers []string
	EventProviders []string
	// Totals is one row per consumer and the federation's last.
	Totals []TotalsRow
	// Migrations are the broker's moves of manual reservations, newest
	// first.
	Migrations []MigrationRow
	// Parts are panels rendered before from the same values (kept while
	// those did not change); a nil part is rendered from the fields above.
	Parts DashboardParts
}

// DashboardParts are panels of the live dashboard rendered before: Charts
// from Ranges and Legend, Why from Why, each other from the field of its
// name.
type DashboardParts struct {
	Charts, Providers, Consumers, Migrations, Totals, Why, Reservations, Instructions templ.Component
}

// DashboardLiveParts are the live dashboard's panels in page order, each a
// top-level element with an id of its own (the live script replaces an
// element by its id): a live update carries only the panels that changed.
// Every part renders its element whatever the data, so that each is on the
// page to be replaced.
func DashboardLiveParts(d Dashboard) []templ.Component {
	return []templ.Component{
		DashboardSummary(d),
		cached(d.Parts.Charts, ChartsPanel(d.Ranges, d.Legend)),
		cached(d.Parts.Providers, ProvidersPanel(d.Providers)),
		cached(d.Parts.Consumers, ConsumersPanel(d.Consumers)),
		cached(d.Parts.Migrations, MigrationsPanel(d.Migrations)),
		cached(d.Parts.Totals, TotalsPanel(d.Totals)),
		cached(d.Parts.Why, WhyPanel(d.Why)),
		cached(d.Parts.Reservations, ReservationsPanel(d.Reservations)),
		cached(d.Parts.Instructions, InstructionsPanel(d.Instructions)),
	}
}

// cached is part when it is set, else render.
func cached(part, render templ.Component) templ.Component {
	if part != nil {
		return part
	}
	return render
}

// MigrationRow is one move of a manual reservation to a better provider.
type MigrationRow struct {
	Consumer    string
	Reservation string
	Target      string
	From, To    string
	Chunks      string
	State       string
	StateClass  string
	Reason      string
	Saving      string
	Started     string
}

// ChunkTypeRow totals one chunk type.
type ChunkTypeRow struct {
	Type      string
	Size      string
	Total     int32
	Reserved  int32
	Available int32
}

// ProviderRow is a provider of the dashboard.
type ProviderRow struct {
	ID        string
	Location  string
	Price     string
	Carbon    string
	Renewable bool
	Sharing   string
	Free      int32
	Reserved  int32
	Total     int32
	// Seen is the provider's last advertisement.
	Seen Age
	// Health is "ok", "warn" (stale) or "bad" (unavailable).
	Health      string
	HealthLabel string
}

// ConsumerRow is a consumer of the dashboard.
type ConsumerRow struct {
	ID       string
	Location string
	Policy   string
	Chosen   string
	RTT      string
	// LastSeen is the consumer's last heartbeat.
	LastSeen Age
	// Saved is what the consumer's finished moves saved ("—" before the
	// first).
	Saved string
	// Budget is "budget 82 % used" or "budget reached: scale-up refused"
	// with its badge class ("" without a budget).
	Budget, BudgetClass string
}

// ReservationRow is a reservation with its phase timeline.
type ReservationRow struct {
	ID         string
	Consumer   string
	Provider   string
	Chunks     string
	Phase      string
	PhaseClass string
	Nodes      string
	Created    string
	Timeline   []Step
}

// Step is one phase of a timeline.
type Step struct {
	Phase   string
	At      string
	Title   string
	Current bool
}

// InstructionRow is an instruction in flight.
type InstructionRow struct {
	ID          string
	Kind        string
	Reservation string
	Target      string
	Attempts    int32
	Issued      string
	Expires     string
	// Delivered is when the target last fetched it (zero Age: queued).
	Delivered Age
	Message   string
}

// Age is a moment a page shows as its age ("12s ago"). The page's script
// counts the age from At against the broker's clock (the live summary's
// data-now) every second, so the moment itself, not its age, is what a
// publication carries: a row is rendered again only when its values
// change. Clock is what shows before the script runs (or without it).
// The zero Age is "never".
type Age struct {
	// At is the moment in Unix milliseconds.
	At string
	// Clock is the moment as hh:mm:ss UTC.
	Clock string
}

// LegendItem names a chart series colour.
type LegendItem struct {
	Name  string
	Color string
}

// Chart is a precomputed SVG line chart.
type Chart struct {
	ID      string
	Title   string
	Unit    string
	Empty   bool
	Lines   []Polyline
	YTicks  []Tick
	XTicks  []Tick
	Width   int
	Height  int
	PlotTop int
	// PlotLeft/PlotRight/PlotBottom frame the plot area.
	PlotLeft, PlotRight, PlotBottom int
}

// Polyline is one series.
type Polyline struct {
	Name   string
	Color  string
	Points string
	// LastX/LastY mark the latest sample, LastTitle its value.
	LastX, LastY, LastTitle string
	// Hover are the points that show their value on hover.
	Hover []HoverPoint
}

// HoverPoint is a point of a line with its value and time as a tooltip.
type HoverPoint struct {
	X, Y, Title string
}

// ChartRange is one time range the charts offer.
type ChartRange struct {
	ID      string
	Label   string
	Default bool
	Charts  []Chart
}

// Tick is an axis label at a position.
type Tick struct {
	Pos   string
	Label string
}

// Login is the login page.
type Login struct {
	Next  string
	Error string
	// Ended explains that the browser's session ended ("" on a first login).
	Ended string
	// Hint tells where the token comes from.
	Hint string
}

// Problem is a refused request explained on a page (CSRF, errors).
type Problem struct {
	Title   string
	Message string
	Back    string
}

// FieldErrors maps a form field name to its error message.
type FieldErrors map[string]string

// Has reports whether the form has errors.
func (e FieldErrors) Has() bool { return len(e) > 0 }

// Invalid returns "true" for the aria-invalid attribute of a field with an
// error, else "false".
func (e FieldErrors) Invalid(field string) string {
	if _, ok := e[field]; ok {
		return "true"
	}
	return "false"
}

func itoa[T ~int | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func viewBox(c Chart) string { return "0 0 " + itoa(c.Width) + " " + itoa(c.Height) }

// sortedErrors lists the messages of errs in field order.
func sortedErrors(errs FieldErrors) []string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, errs[k])
	}
	return out
}
