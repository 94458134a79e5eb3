package web

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// ConsumerConsole is the consumer agent's console: placement policy,
// chosen provider and RTTs, manual reservations, virtual nodes and, in the
// demo, the workload switch.
type ConsumerConsole struct {
	console
	backend  ConsumerBackend
	workload WorkloadBackend // nil when the backend has no workload switch
	locator  LocationSetter  // nil when the backend cannot set the location
	intents  IntentSetter    // nil when the backend cannot set the intent
}

// NewConsumerConsole builds the console over backend. When backend also
// implements WorkloadBackend, the workload switch is shown.
func NewConsumerConsole(backend ConsumerBackend, opts ConsoleOptions) (*ConsumerConsole, error) {
	cc := &ConsumerConsole{backend: backend}
	if err := cc.setup("consumer", backend, opts, cc); err != nil {
		return nil, err
	}
	cc.workload, _ = backend.(WorkloadBackend)
	cc.intents, _ = backend.(IntentSetter)
	if len(cc.site.places) > 0 {
		cc.locator, _ = backend.(LocationSetter)
	}
	return cc, nil
}

// Mount registers the console's routes on app.
func (cc *ConsumerConsole) Mount(app *fiber.App) {
	protect := cc.site.mountCommon(app)
	cc.site.route(app, fiber.MethodGet, "/", protect, cc.get)
	cc.site.route(app, fiber.MethodPost, "/policy", protect, cc.postPolicy)
	cc.site.route(app, fiber.MethodPost, "/reservations", protect, cc.postReserve)
	cc.site.route(app, fiber.MethodPost, "/reservations/release", protect, cc.postRelease)
	if cc.workload != nil {
		cc.site.route(app, fiber.MethodPost, "/workload", protect, cc.postWorkload)
	}
	if cc.locator != nil {
		cc.site.route(app, fiber.MethodPost, "/location", protect, cc.postLocation)
	}
	if cc.intents != nil {
		cc.site.route(app, fiber.MethodPost, "/intent", protect, cc.postIntent)
	}
}

var consumerFlash = map[string]string{
	"policy":   "Policy applied; the broker sees it with the next heartbeat, sent now.",
	"workload": "Workload updated.",
	"reserved": "Reservation requested.",
	"released": "Release requested.",
	"location": "Location set; the broker sees it with the next heartbeat, sent now.",
	"intent":   "Intent saved; the Choice policy's next decision reads it.",
}

// consumerForms carries the forms' state across a failed submission.
type consumerForms struct {
	policy   *views.PolicyForm
	workload *views.WorkloadForm
	reserve  *views.ReserveForm
	intent   *views.IntentForm
	errs     views.FieldErrors
	bad      string
}

func (cc *ConsumerConsole) get(c *fiber.Ctx) error {
	flash := consumerFlash[c.Query("ok")]
	if n, err := strconv.Atoi(c.Query("n")); err == nil && c.Query("ok") == "reserved" && n > 1 && n <= MaxManualChunks {
		flash = fmt.Sprintf("%d reservations requested, one per chunk.", n)
	}
	return cc.render(c, fiber.StatusOK, consumerForms{}, flash)
}

func (cc *ConsumerConsole) render(c *fiber.Ctx, code int, f consumerForms, ok string) error {
	ctx := c.UserContext()
	st, err := cc.backend.Status(ctx)
	if err != nil {
		cc.site.log.Error("consumer console: agent state unavailable", "err", err)
		return fiber.NewError(fiber.StatusServiceUnavailable, "the consumer agent's state is unavailable; retry shortly")
	}
	page := cc.site.page(c, "Consumer console", st.ClusterID, true)
	vm := views.ConsumerConsole{
		Status: consumerStatusView(cc.site.clock.Now(), st, cc.workloadSummary(ctx), cc.site.currency),
		Errors: f.errs, Flash: ok, FormError: f.bad, CSRF: page.CSRF,
	}
	if f.policy != nil {
		vm.Policy = *f.policy
	} else {
		vm.Policy = policyForm(st.Placement)
	}
	if f.reserve != nil {
		vm.Reserve = *f.reserve
	} else {
		vm.Reserve = reserveForm(st, "", string(api.ChunkStandard), "1")
	}
	if cc.intents != nil {
		vm.Intent = &views.IntentForm{Value: st.Intent, Max: choice.MaxIntentLength}
		if f.intent != nil {
			vm.Intent = f.intent
		}
	}
	if cc.locator != nil {
		city := ""
		if st.LocationSet {
			city = st.City
		}
		vm.Location = cc.site.places.form("Now "+location(st.City, st.Region)+", "+locationSource(st.LocationSet)+".", city)
	}
	if cc.workload != nil {
		if f.workload != nil {
			vm.Workload = f.workload
		} else if w, err := cc.workload.Workload(ctx); err == nil {
			vm.Workload = &views.WorkloadForm{
				Enabled: w.Enabled, Replicas: strconv.Itoa(int(w.Replicas)), CPU: w.PodCPU.String(), Memory: w.PodMemory.String(),
			}
		}
	}
	return cc.site.renderPage(c, code, views.ConsumerPage(page, vm))
}

func (cc *ConsumerConsole) workloadSummary(ctx context.Context) string {
	if cc.workload == nil {
		return ""
	}
	w, err := cc.workload.Workload(ctx)
	if err != nil {
		return "workload state unavailable"
	}
	if !w.Enabled {
		return "Workload is off."
	}
	replicas := "replicas"
	if w.Replicas == 1 {
		replicas = "replica"
	}
	return fmt.Sprintf("Workload on: %d %s of %s CPU / %s memory — %d running, %d pending.",
		w.Replicas, replicas, w.PodCPU.String(), w.PodMemory.String(), w.Running, w.Pending)
}

func (cc *ConsumerConsole) renderLive(ctx context.Context) (templ.Component, error) {
	st, err := cc.backend.Status(ctx)
	if err != nil {
		return nil, err
	}
	v := consumerStatusView(cc.site.clock.Now(), st, cc.workloadSummary(ctx), cc.site.currency)
	parts := []templ.Component{
		views.ConsumerStatusPanel(v),
		views.ConsumerChoice(v),
		views.ConsumerReservations(v, "", cc.site.prefix),
		views.ConsumerMigrations(v),
		views.ConsumerNodes(v),
		views.ConsumerTotals(v),
		views.ConsumerWhy(v),
	}
	if cc.workload != nil {
		parts = append(parts, workloadSummaryFragment(v.Workload))
	}
	return templ.Join(parts...), nil
}

func workloadSummaryFragment(s string) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		_, err := fmt.Fprintf(w, `<p class="muted" id="workload-summary">%s</p>`, templ.EscapeString(s))
		return err
	})
}

var policies = []api.PlacementType{api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency, api.PlacementWeighted, api.PlacementChoice}

var weightFields = []struct{ name, label string }{
	{"w_price", "Price weight"}, {"w_carbon", "Carbon weight"}, {"w_distance", "Distance weight"}, {"w_free", "Free capacity weight"},
}

func policyForm(p api.Placement) views.PolicyForm {
	cur, _ := placement.NormalizePolicy(p.Type)
	f := views.PolicyForm{}
	for _, t := range policies {
		f.Policies = append(f.Policies, views.Option{Value: string(t), Label: string(t), Selected: t == cur})
	}
	w := api.Weights{}
	if p.Weights != nil {
		w = *p.Weights
	}
	vals := []float64{w.Price, w.Carbon, w.Distance, w.FreeCapacity}
	for i, wf := range weightFields {
		f.Weights = append(f.Weights, views.WeightField{Name: wf.name, Label: wf.label, Value: strconv.FormatFloat(vals[i], 'f', -1, 64), Max: strconv.Itoa(api.MaxWeight)})
	}
	return f
}

func (cc *ConsumerConsole) postPolicy(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	placement, form, errs := parsePolicy(formGetter(c))
	if len(errs) > 0 {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{policy: &form, errs: errs}, "")
	}
	if err := cc.backend.SetPolicy(c.UserContext(), placement); err != nil {
		return cc.render(c, backendStatus(err), consumerForms{policy: &form, bad: "Policy not applied: " + err.Error()}, "")
	}
	return c.Redirect(cc.site.path("/?ok=policy"), fiber.StatusSeeOther)
}

// parsePolicy validates the policy form (get reads a field) with the
// broker's weight rule; form echoes it for re-display.
func parsePolicy(get func(string) string) (api.Placement, views.PolicyForm, views.FieldErrors) {
	errs := views.FieldErrors{}
	pt := api.PlacementType(get("policy"))
	known := false
	for _, t := range policies {
		known = known || t == pt
	}
	if !known {
		errs["policy"] = "Policy: choose one of Standard, Price, Eco, Latency, Weighted or Choice"
	}
	vals := make([]float64, len(weightFields))
	for i, wf := range weightFields {
		v := strings.TrimSpace(get(wf.name))
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs[wf.name] = fmt.Sprintf("%s: %s is not a number; write a decimal from 0 to %d", wf.label, api.ShowString(v), api.MaxWeight)
			continue
		}
		if fe := api.CheckWeight(wf.name, f); fe != nil {
			errs[wf.name] = wf.label + ": " + fe.Reason()
			continue
		}
		vals[i] = f
	}
	pl := api.Placement{Type: pt}
	sum := vals[0] + vals[1] + vals[2] + vals[3]
	switch {
	case pt == api.PlacementWeighted:
		pl.Weights = &api.Weights{Price: vals[0], Carbon: vals[1], Distance: vals[2], FreeCapacity: vals[3]}
		if sum == 0 && len(errs) == 0 {
			errs["w_price"] = "Weighted policy: set at least one weight above 0"
		}
	case pt == api.PlacementChoice && sum > 0:
		// The fallback's weights (none: equal weights).
		pl.Weights = &api.Weights{Price: vals[0], Carbon: vals[1], Distance: vals[2], FreeCapacity: vals[3]}
	}
	form := policyForm(api.Placement{Type: pt, Weights: &api.Weights{Price: vals[0], Carbon: vals[1], Distance: vals[2], FreeCapacity: vals[3]}})
	return pl, form, errs
}

// postLocation sets (or clears) where the consumer says it is.
func (cc *ConsumerConsole) postLocation(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	loc, errs := cc.site.places.parse(formValue(c, "city"))
	if len(errs) > 0 {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{errs: errs}, "")
	}
	if err := cc.locator.SetLocation(c.UserContext(), loc); err != nil {
		return cc.render(c, backendStatus(err), consumerForms{bad: "Location not set: " + err.Error()}, "")
	}
	return c.Redirect(cc.site.path("/?ok=location"), fiber.StatusSeeOther)
}

func (cc *ConsumerConsole) postWorkload(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	form := views.WorkloadForm{
		Enabled: formValue(c, "enabled") == "on", Replicas: formValue(c, "replicas"),
		CPU: formValue(c, "pod_cpu"), Memory: formValue(c, "pod_memory"),
	}
	errs := views.FieldErrors{}
	w := Workload{Enabled: form.Enabled}
	if n, err := strconv.Atoi(strings.TrimSpace(form.Replicas)); err != nil || n < 0 || n > 500 {
		errs["replicas"] = "Replicas: a whole number from 0 to 500"
	} else {
		w.Replicas = int32(n)
	}
	if q, err := parseQuantity("pod_cpu", strings.TrimSpace(form.CPU)); err != nil || q.Sign() <= 0 || q.Cmp(resource.MustParse("64")) > 0 {
		errs["pod_cpu"] = "CPU per pod: a positive amount up to 64, such as 500m or 1"
	} else {
		w.PodCPU = q
	}
	if q, err := parseQuantity("pod_memory", strings.TrimSpace(form.Memory)); err != nil || q.Sign() <= 0 || q.Cmp(resource.MustParse("256Gi")) > 0 {
		errs["pod_memory"] = "Memory per pod: a positive amount up to 256Gi, such as 512Mi"
	} else {
		w.PodMemory = q
	}
	if len(errs) > 0 {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{workload: &form, errs: errs}, "")
	}
	if err := cc.workload.SetWorkload(c.UserContext(), w); err != nil {
		return cc.render(c, backendStatus(err), consumerForms{workload: &form, bad: "Workload not changed: " + err.Error()}, "")
	}
	return c.Redirect(cc.site.path("/?ok=workload"), fiber.StatusSeeOther)
}

func reserveForm(st ConsumerStatus, provider, chunkType, count string) views.ReserveForm {
	f := views.ReserveForm{Count: count, MaxCount: MaxManualChunks}
	offers := offeredChunks(st)
	f.Providers = append(f.Providers, views.Option{Value: "", Label: "choose a provider…", Selected: provider == ""})
	for _, p := range slices.Sorted(maps.Keys(offers)) {
		types := make([]string, 0, len(offers[p]))
		for _, t := range slices.Sorted(maps.Keys(offers[p])) {
			types = append(types, string(t))
		}
		f.Providers = append(f.Providers, views.Option{Value: p, Label: p + " (" + strings.Join(types, ", ") + ")", Selected: p == provider})
	}
	for _, t := range offeredTypes(offers) {
		f.ChunkTypes = append(f.ChunkTypes, views.Option{Value: string(t), Label: string(t), Selected: string(t) == chunkType})
	}
	return f
}

// offeredChunks is, per provider, the chunk types the broker offers.
func offeredChunks(st ConsumerStatus) map[string]map[api.ChunkType]bool {
	out := map[string]map[api.ChunkType]bool{}
	for _, g := range st.NodeGroups {
		t := g.Type
		if t == "" {
			t = api.ChunkStandard
		}
		if out[g.ProviderClusterID] == nil {
			out[g.ProviderClusterID] = map[api.ChunkType]bool{}
		}
		out[g.ProviderClusterID][t] = true
	}
	return out
}

// offeredTypes is every chunk type some provider offers, sorted.
func offeredTypes(offers map[string]map[api.ChunkType]bool) []api.ChunkType {
	all := map[api.ChunkType]bool{}
	for _, ts := range offers {
		for t := range ts {
			all[t] = true
		}
	}
	return slices.Sorted(maps.Keys(all))
}

// MaxManualChunks is the most chunks one manual reservation form asks for
// (each becomes a one-chunk reservation).
const MaxManualChunks = 64

// parseReservation validates the manual reservation form against the chunk
// types each provider offers. The spec's ChunkCount is the number of chunks
// asked for; each becomes a one-chunk reservation.
func parseReservation(provider, ct, count string, offers map[string]map[api.ChunkType]bool) (ReservationSpec, views.FieldErrors) {
	errs := views.FieldErrors{}
	spec := ReservationSpec{ProviderClusterID: provider, ChunkType: api.ChunkType(ct)}
	types, known := offers[provider]
	switch {
	case !known:
		errs["provider"] = "Provider: choose one of the providers the broker offers"
	case !slices.Contains(offeredTypes(offers), spec.ChunkType):
		names := make([]string, 0, 2)
		for _, t := range offeredTypes(offers) {
			names = append(names, string(t))
		}
		errs["chunk_type"] = "Chunk type: choose one the providers offer (" + strings.Join(names, ", ") + ")"
	case !types[spec.ChunkType]:
		errs["chunk_type"] = fmt.Sprintf("%s offers no %s chunks", provider, spec.ChunkType)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(count)); err != nil || n < 1 || n > MaxManualChunks {
		errs["count"] = fmt.Sprintf("Chunks: a whole number from 1 to %d", MaxManualChunks)
	} else {
		spec.ChunkCount = int32(n)
	}
	return spec, errs
}

// postReserve makes one one-chunk reservation per chunk asked for (the
// broker reserves one chunk per reservation: one virtual node each). It
// stops at the first refusal and says how many were made.
func (cc *ConsumerConsole) postReserve(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	ctx := c.UserContext()
	st, err := cc.backend.Status(ctx)
	if err != nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, "the consumer agent's state is unavailable; retry shortly")
	}
	provider, ct, count := formValue(c, "provider"), formValue(c, "chunk_type"), formValue(c, "count")
	spec, errs := parseReservation(provider, ct, count, offeredChunks(st))
	form := reserveForm(st, provider, ct, count)
	if len(errs) > 0 {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{reserve: &form, errs: errs}, "")
	}
	want := spec.ChunkCount
	one := spec
	one.ChunkCount = 1
	var made int32
	for ; made < want; made++ {
		if _, err = cc.backend.CreateReservation(ctx, one); err != nil {
			break
		}
	}
	if err != nil {
		cc.site.log.Info("consumer console: manual reservation refused", "provider", provider, "chunkType", ct, "made", made, "asked", want, "err", err)
		msg := "Reservation not created: " + err.Error() + "."
		if made > 0 {
			msg = fmt.Sprintf("Reserved %d of %d chunks; the rest were not: %s.", made, want, err.Error())
		}
		return cc.render(c, backendStatus(err), consumerForms{reserve: &form, bad: msg}, "")
	}
	return c.Redirect(cc.site.path("/?ok=reserved&n="+strconv.Itoa(int(made))), fiber.StatusSeeOther)
}

func (cc *ConsumerConsole) postRelease(c *fiber.Ctx) error {
	if err := cc.site.checkWrite(c); err != nil {
		return cc.site.csrfRefused(c, err)
	}
	id := formValue(c, "id")
	if fe := api.CheckReservationID("id", id); fe != nil {
		return cc.render(c, fiber.StatusUnprocessableEntity, consumerForms{bad: "Release: the reservation id " + fe.Reason()}, "")
	}
	if err := cc.backend.ReleaseReservation(c.UserContext(), id); err != nil {
		return cc.render(c, backendStatus(err), consumerForms{bad: "Release failed: " + err.Error()}, "")
	}
	return c.Redirect(cc.site.path("/?ok=released"), fiber.StatusSeeOther)
}

func consumerStatusView(now time.Time, st ConsumerStatus, workload, cur string) views.ConsumerStatus {
	chosen := st.ChosenProvider
	if chosen == "" {
		chosen = dash
	}
	v := views.ConsumerStatus{
		ClusterID: st.ClusterID, Workload: workload,
		Facts: []views.KV{
			{Label: "Cluster", Value: st.ClusterID},
			{Label: "Location", Value: sourced(location(st.City, st.Region), st.LocationSet)},
			{Label: "Policy", Value: policyLabel(st.Placement.Type, st.AppliedPlacement)},
			{Label: "Chosen provider", Value: chosen},
			{Label: "Last heartbeat", Value: ago(now, st.LastHeartbeat)},
		},
		Migrations: migrationRows(cur, st.ClusterID, st.Migrations), Saved: savingsLabel(cur, st.Savings),
	}
	provs := make([]string, 0, len(st.RTTs))
	for p := range st.RTTs {
		provs = append(provs, p)
	}
	sort.Strings(provs)
	for _, p := range provs {
		v.RTTs = append(v.RTTs, views.RTTRow{Provider: p, RTT: millis(st.RTTs[p]), Chosen: p == st.ChosenProvider})
	}
	applied := st.AppliedPlacement
	if applied == "" {
		applied = st.Placement.Type
	}
	header, metric := metricColumn(applied, cur)
	v.MetricHeader = header
	groups := append([]api.NodeGroupView(nil), st.NodeGroups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	for _, g := range groups {
		row := views.GroupRow{
			ID: g.ID, Provider: g.ProviderClusterID, Type: string(g.Type), Cost: quantityPerHour(cur, g.Cost), Metric: dash,
			Reserved: maskedUse(g, st.MaskedNodeGroups),
		}
		if g.HasMetric && g.PlacementMetric != nil {
			row.Metric = metric(*g.PlacementMetric)
		}
		v.Groups = append(v.Groups, row)
	}
	rs := append([]ConsumerReservation(nil), st.Reservations...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].CreatedAt.After(rs[j].CreatedAt) })
	for _, r := range rs {
		origin := "autoscaler"
		if r.Manual {
			origin = "manual"
		}
		phase, class := phaseLabel(r.Phase, r.GraceUntil)
		v.Reservations = append(v.Reservations, views.ConsumerReservationRow{
			ID: r.ID, Provider: r.ProviderClusterID, Chunks: chunksLabel(r.ChunkCount, r.ChunkType),
			Phase: phase, PhaseClass: class, Origin: origin, Created: ago(now, r.CreatedAt),
			Releasable: !r.Phase.Terminal() && r.Phase != api.PhaseUnpeering,
		})
	}
	if st.Explanation != nil {
		why := buildWhy(*st.Explanation, cur, ConsoleWhyRows)
		v.Why = &why
		v.Totals = consoleTotals(st.ClusterID, *st.Explanation, cur)
	}
	v.Unfit, v.UnfitError = unfitRows(st), st.UnfitPodsError
	v.Choice = choicePanel(now, st)
	v.Budget = budgetPanel(now, st.Budget, st.BudgetRefusal, st.BudgetRefusalAt, cur)
	nodes := append([]VirtualNode(nil), st.VirtualNodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		cls := "warn"
		switch n.State {
		case "Ready":
			cls = "ok"
		case "NotReady":
			cls = "bad"
		}
		v.Nodes = append(v.Nodes, views.NodeRow{
			Name: n.Name, Reservation: n.ReservationID, Provider: n.ProviderClusterID,
			State: n.State, StateClass: cls, Since: ago(now, n.Since),
		})
	}
	return v
}
