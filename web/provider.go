package web

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// ProviderConsole is the provider agent's console: sharing configuration
// and what is lent now.
type ProviderConsole struct {
	console
	backend ProviderBackend
}

// NewProviderConsole builds the console over backend. Mount it (or use App)
// and call Run.
func NewProviderConsole(backend ProviderBackend, opts ConsoleOptions) (*ProviderConsole, error) {
	p := &ProviderConsole{backend: backend}
	if err := p.setup("provider", backend, opts, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Mount registers the console's routes on app.
func (p *ProviderConsole) Mount(app *fiber.App) {
	protect := p.site.mountCommon(app)
	p.site.route(app, fiber.MethodGet, "/", protect, p.get)
	p.site.route(app, fiber.MethodPost, "/sharing", protect, p.postSharing)
	if len(p.site.places) > 0 {
		p.site.route(app, fiber.MethodPost, "/location", protect, p.postLocation)
	}
}

var providerFlash = map[string]string{
	"sharing":  "Applied. The new configuration was advertised to the broker.",
	"location": "Location set and advertised to the broker.",
}

func (p *ProviderConsole) get(c *fiber.Ctx) error {
	cfg, err := p.backend.SharingConfig(c.UserContext())
	if err != nil {
		return p.unavailable(c, err)
	}
	return p.render(c, fiber.StatusOK, sharingFormFromConfig(cfg), nil, providerFlash[c.Query("ok")], "")
}

func (p *ProviderConsole) render(c *fiber.Ctx, code int, form views.SharingForm, errs views.FieldErrors, ok, bad string) error {
	st, err := p.backend.Status(c.UserContext())
	if err != nil {
		return p.unavailable(c, err)
	}
	vm := views.ProviderConsole{Status: providerStatusView(p.site.clock.Now(), st, p.site.currency), Form: form, Errors: errs, Flash: ok, FormError: bad}
	if cfg, err := p.backend.SharingConfig(c.UserContext()); err == nil {
		city := ""
		if cfg.Location != nil {
			city = cfg.Location.City
		}
		vm.Location = p.site.places.form("Now "+topologyLocation(st.Topology)+", "+locationSource(st.LocationSet)+".", city)
	}
	return p.site.renderPage(c, code, views.ProviderPage(p.site.page(c, "Provider console", st.ClusterID, true), vm))
}

// postLocation sets (or clears) the provider's location in its sharing
// configuration, which is stored and advertised at once.
func (p *ProviderConsole) postLocation(c *fiber.Ctx) error {
	if err := p.site.checkWrite(c); err != nil {
		return p.site.csrfRefused(c, err)
	}
	ctx := c.UserContext()
	cfg, err := p.backend.SharingConfig(ctx)
	if err != nil {
		return p.unavailable(c, err)
	}
	loc, errs := p.site.places.parse(formValue(c, "city"))
	if len(errs) > 0 {
		return p.render(c, fiber.StatusUnprocessableEntity, sharingFormFromConfig(cfg), errs, "", "")
	}
	cfg.Location = loc
	if err := p.backend.ApplySharing(ctx, cfg); err != nil {
		p.site.log.Warn("provider console: setting the location failed", "err", err)
		return p.render(c, backendStatus(err), sharingFormFromConfig(cfg), nil, "", "Location not set: "+err.Error())
	}
	p.site.log.Info("provider console: location set", "city", formValue(c, "city"), "remote", c.IP())
	return c.Redirect(p.site.path("/?ok=location"), fiber.StatusSeeOther)
}

func (p *ProviderConsole) unavailable(c *fiber.Ctx, err error) error {
	p.site.log.Error("provider console: agent state unavailable", "err", err)
	return fiber.NewError(fiber.StatusServiceUnavailable, "the provider agent's state is unavailable; retry shortly")
}

func (p *ProviderConsole) postSharing(c *fiber.Ctx) error {
	if err := p.site.checkWrite(c); err != nil {
		return p.site.csrfRefused(c, err)
	}
	form := sharingFormFromRequest(c)
	cfg, errs := parseSharing(formGetter(c))
	if len(errs) > 0 {
		return p.render(c, fiber.StatusUnprocessableEntity, form, errs, "", "")
	}
	if err := p.backend.ApplySharing(c.UserContext(), cfg); err != nil {
		p.site.log.Warn("provider console: apply sharing failed", "err", err)
		return p.render(c, backendStatus(err), form, nil, "", "Not applied: "+err.Error())
	}
	p.site.log.Info("provider console: sharing configuration applied", "remote", c.IP())
	return c.Redirect(p.site.path("/?ok=sharing"), fiber.StatusSeeOther)
}

func (p *ProviderConsole) renderLive(ctx context.Context) (templ.Component, error) {
	st, err := p.backend.Status(ctx)
	if err != nil {
		return nil, err
	}
	v := providerStatusView(p.site.clock.Now(), st, p.site.currency)
	return templ.Join(views.ProviderStatusPanel(v), views.ProviderLoans(v)), nil
}

// consoleResource is a resource the form prices and caps.
type consoleResource struct {
	key   string // form field suffix
	name  corev1.ResourceName
	label string
	unit  string
	// example is shown in validation messages.
	example string
}

var consoleResources = []consoleResource{
	{"cpu", corev1.ResourceCPU, "CPU", "per core-hour", "4 or 500m"},
	{"memory", corev1.ResourceMemory, "Memory", "per GiB-hour", "8Gi"},
	{"gpu", "nvidia.com/gpu", "GPU", "per GPU-hour", "1"},
}

func sharingFormFromConfig(cfg SharingConfig) views.SharingForm {
	f := views.SharingForm{Renewable: cfg.Renewable}
	for _, r := range consoleResources {
		pf := views.PriceField{Name: "price_" + r.key, Label: r.label + " price", Unit: r.unit}
		if q, ok := cfg.UnitPrices[r.name]; ok {
			pf.Value = decimal(q)
		}
		f.Prices = append(f.Prices, pf)
		mode, val := "none", ""
		if pct, ok := cfg.CapacityScalePercent[string(r.name)]; ok {
			mode, val = "percent", strconv.Itoa(int(pct))
		} else if q, ok := cfg.CapacityFixed[r.name]; ok {
			mode, val = "fixed", q.String()
		}
		f.Caps = append(f.Caps, capField(r, mode, val))
	}
	f.Allowed = strings.Join(cfg.Sharing.AllowedConsumers, ", ")
	f.Denied = strings.Join(cfg.Sharing.DeniedConsumers, ", ")
	f.Quota = strconv.Itoa(int(cfg.Sharing.MaxChunksPerConsumer))
	return f
}

func capField(r consoleResource, mode, val string) views.CapField {
	cf := views.CapField{Resource: r.label, ModeName: "cap_mode_" + r.key, ValueName: "cap_value_" + r.key, Value: val}
	for _, m := range [][2]string{{"none", "no cap"}, {"percent", "% of allocatable"}, {"fixed", "fixed amount"}} {
		cf.Modes = append(cf.Modes, views.Option{Value: m[0], Label: m[1], Selected: m[0] == mode})
	}
	return cf
}

// sharingFormFromRequest echoes what was submitted, for re-display.
func sharingFormFromRequest(c *fiber.Ctx) views.SharingForm {
	f := views.SharingForm{
		Renewable: formValue(c, "renewable") == "on",
		Allowed:   formValue(c, "allowed"), Denied: formValue(c, "denied"), Quota: formValue(c, "quota"),
	}
	for _, r := range consoleResources {
		f.Prices = append(f.Prices, views.PriceField{
			Name: "price_" + r.key, Label: r.label + " price", Unit: r.unit, Value: formValue(c, "price_"+r.key),
		})
		f.Caps = append(f.Caps, capField(r, formValue(c, "cap_mode_"+r.key), formValue(c, "cap_value_"+r.key)))
	}
	return f
}

// parseSharing validates the sharing form (get reads a field) with the
// broker's rules (the server/api checks the advertisement goes through);
// errs maps field → message.
func parseSharing(get func(string) string) (SharingConfig, views.FieldErrors) {
	errs := views.FieldErrors{}
	cfg := SharingConfig{
		UnitPrices:           corev1.ResourceList{},
		CapacityScalePercent: map[string]int32{},
		CapacityFixed:        corev1.ResourceList{},
		Renewable:            get("renewable") == "on",
	}
	for _, r := range consoleResources {
		field := "price_" + r.key
		if v := strings.TrimSpace(get(field)); v != "" {
			q, err := parseQuantity(field, v)
			switch {
			case err != nil:
				errs[field] = fmt.Sprintf("%s price: %q is not a number; write a decimal such as 0.02", r.label, v)
			default:
				if fe := api.CheckUnitPrice(field, q); fe != nil {
					errs[field] = r.label + " price: " + fe.Reason()
					break
				}
				cfg.UnitPrices[r.name] = q
			}
		}
		mode := get("cap_mode_" + r.key)
		vfield := "cap_value_" + r.key
		v := strings.TrimSpace(get(vfield))
		switch mode {
		case "", "none":
		case "percent":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				errs[vfield] = fmt.Sprintf("%s cap: a percentage must be a whole number from 0 to %d", r.label, api.MaxPercent)
				break
			}
			if fe := api.CheckPercent(vfield, n); fe != nil {
				errs[vfield] = r.label + " cap: " + fe.Reason()
				break
			}
			cfg.CapacityScalePercent[string(r.name)] = int32(n)
		case "fixed":
			q, err := parseQuantity(vfield, v)
			if err != nil {
				errs[vfield] = fmt.Sprintf("%s cap: a fixed cap must be an amount such as %s", r.label, r.example)
				break
			}
			if fe := api.CheckQuantity(vfield, q); fe != nil {
				errs[vfield] = r.label + " cap: " + fe.Reason()
				break
			}
			cfg.CapacityFixed[r.name] = q
		default:
			errs[vfield] = fmt.Sprintf("%s cap: unknown cap mode %s", r.label, api.ShowString(mode))
		}
	}
	var err string
	if cfg.Sharing.AllowedConsumers, err = parseClusterList(get("allowed")); err != "" {
		errs["allowed"] = "Allowed consumers: " + err
	}
	if cfg.Sharing.DeniedConsumers, err = parseClusterList(get("denied")); err != "" {
		errs["denied"] = "Denied consumers: " + err
	}
	if q := strings.TrimSpace(get("quota")); q != "" {
		n, perr := strconv.ParseInt(q, 10, 32)
		if perr != nil || n < 0 {
			errs["quota"] = "Chunks per consumer: a whole number from 0 (no limit) up"
		} else {
			cfg.Sharing.MaxChunksPerConsumer = int32(n)
		}
	}
	return cfg, errs
}

// parseQuantity is api.ParseQuantity as an error (nil when it parsed).
func parseQuantity(field, v string) (resource.Quantity, error) {
	q, fe := api.ParseQuantity(field, v)
	if fe != nil {
		return q, fe
	}
	return q, nil
}

// parseClusterList splits a list of cluster ids (commas, semicolons or
// white space), drops duplicates and checks each with the broker's rule.
func parseClusterList(s string) ([]string, string) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	seen := map[string]bool{}
	var out []string
	for _, f := range fields {
		if fe := api.CheckClusterID("id", f); fe != nil {
			return nil, fe.Reason()
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if fe := api.CheckCount("ids", len(out), api.MaxSharingConsumers); fe != nil {
		return nil, fe.Reason()
	}
	return out, ""
}

func providerStatusView(now time.Time, st ProviderStatus, cur string) views.ProviderStatus {
	v := views.ProviderStatus{ClusterID: st.ClusterID, Broker: "advertised", BrokerClass: "ok"}
	if st.LastAdvertised.IsZero() {
		v.Broker, v.BrokerClass = "not advertised yet", "warn"
	}
	if st.BrokerError != "" {
		v.Broker, v.BrokerClass = "broker unreachable", "bad"
	}
	coords := dash
	if st.Topology.HasCoordinates() {
		coords = fmt.Sprintf("%.4f, %.4f", st.Topology.Latitude, st.Topology.Longitude)
	}
	v.Facts = []views.KV{
		{Label: "Cluster", Value: st.ClusterID},
		{Label: "Location", Value: sourced(topologyLocation(st.Topology), st.LocationSet)},
		{Label: "Coordinates", Value: coords},
		{Label: "Carbon intensity now", Value: carbon(st.CarbonIntensity)},
		{Label: "Carbon, weighted 6 h", Value: carbon(st.CarbonWeighted)},
		{Label: "Last advertisement", Value: ago(now, st.LastAdvertised)},
	}
	if st.BrokerError != "" {
		v.Facts = append(v.Facts, views.KV{Label: "Broker error", Value: st.BrokerError})
	}
	keys := make([]string, 0, len(st.Resources))
	for k := range st.Resources {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		q := st.Resources[corev1.ResourceName(k)]
		v.Capacity = append(v.Capacity, views.KV{Label: k, Value: q.String()})
	}
	if len(v.Capacity) == 0 {
		v.Capacity = []views.KV{{Label: "allocatable", Value: dash}}
	}
	v.Chunks = chunkRows(st.Chunks, func(api.ChunkType) string { return "" })
	loans := append([]Loan(nil), st.Loans...)
	sort.Slice(loans, func(i, j int) bool { return loans[i].Since.After(loans[j].Since) })
	for _, l := range loans {
		v.Loans = append(v.Loans, views.LoanRow{
			Reservation: l.ReservationID, Consumer: l.ConsumerClusterID, Chunks: chunksLabel(l.ChunkCount, l.ChunkType),
			Phase: string(l.Phase), PhaseClass: phaseClass(l.Phase), Since: ago(now, l.Since), Price: pricePerHour(cur, l.CostPerHour),
		})
	}
	return v
}

// decimal renders a price as a plain decimal ("0.004", not "4m").
func decimal(q resource.Quantity) string {
	return q.AsDec().String()
}
