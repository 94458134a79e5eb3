package api

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits of the values the broker accepts and the agents send. They are the
// one definition of each rule: the broker's REST decoding and domain, the
// agents' configuration parsers and the consoles all check with the Check*
// functions below (docs/broker-api.md, "Validation and limits"). A value
// beyond a limit is refused with 400 InvalidRequest naming the field, the
// value and the allowed range; nothing is clamped silently.
const (
	// MaxUnitPrice is the highest unit price per unit-hour (cpu per
	// core-hour, memory per GiB-hour, any other resource per unit-hour).
	MaxUnitPrice = 1_000_000
	// MaxQuantity is the largest amount of one resource (advertised
	// resources, capacityFixed, chunk shapes) in its base unit: 10^18, i.e.
	// "1E" cores, bytes or devices.
	MaxQuantity = 1_000_000_000_000_000_000
	// MaxCarbonIntensity is the highest carbon intensity in gCO2eq/kWh
	// (carbonIntensity and each carbonForecast value; real grids stay below
	// 1 500).
	MaxCarbonIntensity = 100_000
	// MaxCarbonForecast is the longest carbonForecast: one week of hourly
	// values (agents send 24).
	MaxCarbonForecast = 168
	// MaxWeight is the highest Weighted-policy weight (weights are relative;
	// they need not sum to 1).
	MaxWeight = 1000
	// MaxLatencyMillis is the highest measured latency in milliseconds.
	MaxLatencyMillis = 1_000_000
	// MaxLatencyCandidates is the most providers per chunk type a Latency
	// shortlist offers (Placement.LatencyCandidates, and the distance ties
	// kept past it): two rounds of the consumer agent's probes.
	MaxLatencyCandidates = 16
	// DefaultLatencyCandidates is the Latency shortlist's size for a
	// consumer that does not say (Placement.LatencyCandidates 0): the
	// reference's three nearest (§6.5), so a reference agent sees what it saw.
	DefaultLatencyCandidates = 3
	// MaxNamespaces is the most namespaces one reservation may offload.
	MaxNamespaces = 64
	// MaxSharingConsumers is the most cluster ids in one sharing list
	// (allowedConsumers, deniedConsumers).
	MaxSharingConsumers = 1000
	// MaxTextLength is the longest free-text field (topology zone, region
	// and city, the heartbeat's region and city, probeEndpoint), in bytes.
	MaxTextLength = 256
	// MaxPercent is the highest capacityScalePercent.
	MaxPercent = 100
	// MaxDisconnectGraceSeconds is the longest disconnect grace a consumer
	// may ask for (lifecycle.disconnectGraceSeconds): one day.
	MaxDisconnectGraceSeconds = 86400
)

// maxShownValue bounds how much of a refused string an error echoes.
const maxShownValue = 64

// FieldError is one refused field: its JSON path, the value as received
// (quoted and shortened when it is a string) and what is allowed.
type FieldError struct {
	Field string
	Value string
	Want  string
}

func (e *FieldError) Error() string { return e.Field + " = " + e.Value + ": must be " + e.Want }

// Reason is the message without the field name, for callers that label the
// field themselves (the consoles): "<value> is not allowed: must be <want>".
func (e *FieldError) Reason() string { return e.Value + " is not allowed: must be " + e.Want }

// APIError is e as a 400 InvalidRequest whose details name the field, the
// value and the allowed range (all strings, so JSON can always carry them).
func (e *FieldError) APIError() *Error {
	return &Error{Code: CodeInvalidRequest, Message: e.Error(), Details: map[string]any{
		"field": e.Field, "value": e.Value, "allowed": e.Want,
	}}
}

func fieldErr(field, value, want string) *FieldError {
	return &FieldError{Field: field, Value: value, Want: want}
}

// ShowString renders a refused string for an error: quoted (so NUL bytes and
// invalid UTF-8 are escaped) and cut to a few dozen bytes with its length.
func ShowString(s string) string {
	if len(s) <= maxShownValue {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxShownValue]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

func showFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func showInt(v int64) string { return strconv.FormatInt(v, 10) }

// finiteIn reports whether v is a finite number in [lo, hi].
func finiteIn(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }

// Sub returns the path of a map key or list index below field: field[key].
func Sub(field string, key any) string {
	switch k := key.(type) {
	case int:
		return field + "[" + strconv.Itoa(k) + "]"
	case string:
		return field + "[" + k + "]"
	case corev1.ResourceName:
		return field + "[" + string(k) + "]"
	}
	return field
}

// join is the path of name below field ("" is the top level).
func join(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}

// CheckClusterID checks a required cluster id: a DNS-1123 label (lowercase
// letters, digits and '-', 1–63 characters). Broker cluster ids and Liqo
// cluster ids follow the same rule (Liqo refuses anything else).
func CheckClusterID(field, id string) *FieldError {
	if id == "" || len(id) > validation.DNS1123LabelMaxLength || len(validation.IsDNS1123Label(id)) > 0 {
		return fieldErr(field, ShowString(id), "a cluster id: a DNS-1123 label (lowercase letters, digits and '-', 1 to 63 characters, starting and ending with a letter or digit)")
	}
	return nil
}

// MaxLiqoClusterIDLength is the longest Liqo cluster id: Liqo keeps a peer's
// resources in the namespace "liqo-tenant-<id>", a DNS-1123 label of at most
// 63 characters, so 63 - len("liqo-tenant-") = 51.
const MaxLiqoClusterIDLength = validation.DNS1123LabelMaxLength - len("liqo-tenant-")

// CheckLiqoClusterID checks a Liqo cluster id: a DNS-1123 label (Liqo's own
// rule, the chart's regexMatch) of at most MaxLiqoClusterIDLength characters,
// so that the tenant namespace named after it is a valid namespace. Both Liqo
// drivers (agent/liqo and mocks/liqo) and the broker check ids with it.
func CheckLiqoClusterID(field, id string) *FieldError {
	if id == "" || len(id) > MaxLiqoClusterIDLength || len(validation.IsDNS1123Label(id)) > 0 {
		return fieldErr(field, ShowString(id), "a Liqo cluster id: a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit) of 1 to "+strconv.Itoa(MaxLiqoClusterIDLength)+" characters, so that its tenant namespace liqo-tenant-<id> fits 63")
	}
	return nil
}

// CheckOptionalClusterID is CheckClusterID that also accepts "".
func CheckOptionalClusterID(field, id string) *FieldError {
	if id == "" {
		return nil
	}
	return CheckClusterID(field, id)
}

// CheckReservationID checks a reservation id: a DNS-1123 subdomain (it
// names Kubernetes objects), at most 253 characters.
func CheckReservationID(field, id string) *FieldError {
	if id == "" || len(id) > validation.DNS1123SubdomainMaxLength || len(validation.IsDNS1123Subdomain(id)) > 0 {
		return fieldErr(field, ShowString(id), "a reservation id: a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', 1 to 253 characters)")
	}
	return nil
}

// CheckNamespace checks a Kubernetes namespace name (a DNS-1123 label).
func CheckNamespace(field, ns string) *FieldError {
	if ns == "" || len(ns) > validation.DNS1123LabelMaxLength || len(validation.IsDNS1123Label(ns)) > 0 {
		return fieldErr(field, ShowString(ns), "a namespace name: a DNS-1123 label (lowercase letters, digits and '-', 1 to 63 characters)")
	}
	return nil
}

// CheckResourceName checks a resource name: a Kubernetes qualified name such
// as cpu, memory or nvidia.com/gpu.
func CheckResourceName(field string, name corev1.ResourceName) *FieldError {
	if name == "" || len(validation.IsQualifiedName(string(name))) > 0 {
		return fieldErr(field, ShowString(string(name)), "a resource name: a Kubernetes qualified name such as cpu, memory or nvidia.com/gpu")
	}
	return nil
}

// MaxQuantityValue is MaxQuantity as a Quantity.
func MaxQuantityValue() resource.Quantity {
	return *resource.NewQuantity(MaxQuantity, resource.DecimalSI)
}

// MaxUnitPriceValue is MaxUnitPrice as a Quantity.
func MaxUnitPriceValue() resource.Quantity {
	return *resource.NewQuantity(MaxUnitPrice, resource.DecimalSI)
}

func checkQuantityIn(field string, q resource.Quantity, hi resource.Quantity, want string) *FieldError {
	if q.Sign() < 0 || q.Cmp(hi) > 0 {
		return fieldErr(field, ShowString(q.String()), want)
	}
	return nil
}

// CheckQuantity checks an amount of a resource: 0 to MaxQuantity.
func CheckQuantity(field string, q resource.Quantity) *FieldError {
	return checkQuantityIn(field, q, MaxQuantityValue(), "a quantity from 0 to 1E (10^18) in the resource's base unit")
}

// CheckUnitPrice checks a unit price: 0 to MaxUnitPrice per unit-hour.
func CheckUnitPrice(field string, q resource.Quantity) *FieldError {
	return checkQuantityIn(field, q, MaxUnitPriceValue(), "a price from 0 to 1000000 per unit-hour")
}

// CheckResourceList checks every name of l and every amount with check, in
// name order; the first failure is returned.
func CheckResourceList(field string, l corev1.ResourceList, check func(string, resource.Quantity) *FieldError) *FieldError {
	for _, name := range sortedResourceNames(l) {
		f := Sub(field, name)
		if err := CheckResourceName(f, name); err != nil {
			return err
		}
		if err := check(f, l[name]); err != nil {
			return err
		}
	}
	return nil
}

// CheckPercent checks a capacity percentage: 0 to MaxPercent.
func CheckPercent(field string, p int64) *FieldError {
	if p < 0 || p > MaxPercent {
		return fieldErr(field, showInt(p), "a whole percentage from 0 to 100")
	}
	return nil
}

// checkNumber refuses v unless it is a finite number in [lo, hi]; want says
// so in words.
func checkNumber(field string, v, lo, hi float64, want string) *FieldError {
	if !finiteIn(v, lo, hi) {
		return fieldErr(field, showFloat(v), want)
	}
	return nil
}

// CheckCarbon checks a carbon intensity: a finite number from 0 to
// MaxCarbonIntensity gCO2eq/kWh.
func CheckCarbon(field string, v float64) *FieldError {
	return checkNumber(field, v, 0, MaxCarbonIntensity, "a finite number from 0 to 100000 (gCO2eq/kWh)")
}

// CheckWeight checks a Weighted-policy weight: a finite number from 0 to
// MaxWeight.
func CheckWeight(field string, v float64) *FieldError {
	return checkNumber(field, v, 0, MaxWeight, "a finite number from 0 to 1000")
}

// CheckLatency checks a measured latency: a finite number of milliseconds
// from 0 to MaxLatencyMillis.
func CheckLatency(field string, v float64) *FieldError {
	return checkNumber(field, v, 0, MaxLatencyMillis, "a finite number of milliseconds from 0 to 1000000")
}

// CheckLatitude checks a latitude in decimal degrees: [-90, 90].
func CheckLatitude(field string, v float64) *FieldError {
	return checkNumber(field, v, -90, 90, "a latitude from -90 to 90")
}

// CheckLongitude checks a longitude in decimal degrees: [-180, 180].
func CheckLongitude(field string, v float64) *FieldError {
	return checkNumber(field, v, -180, 180, "a longitude from -180 to 180")
}

// CheckText checks a free-text field: valid UTF-8 without control
// characters, at most MaxTextLength bytes ("" is fine).
func CheckText(field, s string) *FieldError {
	ok := len(s) <= MaxTextLength && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
	if !ok {
		return fieldErr(field, ShowString(s), "text of at most 256 bytes of valid UTF-8 without control characters")
	}
	return nil
}

// CheckCount checks the length of a list against its limit.
func CheckCount(field string, n, limit int) *FieldError {
	if n > limit {
		return fieldErr(field, showInt(int64(n))+" entries", "at most "+strconv.Itoa(limit)+" entries")
	}
	return nil
}

// Check checks the four weights (each CheckWeight).
func (w *Weights) Check(field string) *FieldError {
	if w == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"price", w.Price}, {"carbon", w.Carbon}, {"distance", w.Distance}, {"freeCapacity", w.FreeCapacity}} {
		if err := CheckWeight(join(field, f.name), f.v); err != nil {
			return err
		}
	}
	return nil
}

// CheckLatencyCandidates checks a Latency shortlist size: 0 (the default)
// to MaxLatencyCandidates.
func CheckLatencyCandidates(field string, n int) *FieldError {
	if n < 0 || n > MaxLatencyCandidates {
		return fieldErr(field, showInt(int64(n)), "from 1 to "+strconv.Itoa(MaxLatencyCandidates)+" providers (0 or absent: "+strconv.Itoa(DefaultLatencyCandidates)+")")
	}
	return nil
}

// Check checks a placement's weights and Latency shortlist size. An
// unknown type is not an error: the broker serves it as Standard and warns
// (docs/broker-api.md).
func (p *Placement) Check(field string) *FieldError {
	if p == nil {
		return nil
	}
	if err := CheckLatencyCandidates(join(field, "latencyCandidates"), p.LatencyCandidates); err != nil {
		return err
	}
	return p.Weights.Check(join(field, "weights"))
}

// Check checks the lifecycle settings: disconnectGraceSeconds from 0 to
// MaxDisconnectGraceSeconds, the thresholds (Thresholds.Check), the
// migration budget (MigrationBudget.Check).
func (l *Lifecycle) Check(field string) *FieldError {
	if l == nil {
		return nil
	}
	if l.DisconnectGraceSeconds != nil {
		if g := *l.DisconnectGraceSeconds; g < 0 || g > MaxDisconnectGraceSeconds {
			return fieldErr(join(field, "disconnectGraceSeconds"), showInt(int64(g)), "from 0 to "+strconv.Itoa(MaxDisconnectGraceSeconds)+" seconds")
		}
	}
	if l.MaxMovesPerWindow != nil {
		if m := *l.MaxMovesPerWindow; m < 0 || m > MaxMovesPerWindow {
			return fieldErr(join(field, "maxMovesPerWindow"), showInt(int64(m)), "from 0 to "+strconv.Itoa(MaxMovesPerWindow))
		}
	}
	if l.MoveWindowSeconds != nil {
		if w := *l.MoveWindowSeconds; w < 1 || w > MaxMoveWindowSeconds {
			return fieldErr(join(field, "moveWindowSeconds"), showInt(int64(w)), "from 1 to "+strconv.Itoa(MaxMoveWindowSeconds)+" seconds")
		}
	}
	if fe := l.Thresholds.Check(join(field, "thresholds")); fe != nil {
		return fe
	}
	return l.Migrations.Check(join(field, "migrations"))
}

// Bounds of the moves' disruption budget (Lifecycle).
const (
	MaxMovesPerWindow    = 1000
	MaxMoveWindowSeconds = 7 * 24 * 3600
)

// Check checks the sharing rules: at most MaxSharingConsumers cluster ids per
// list, each a cluster id, and maxChunksPerConsumer >= 0.
func (s *Sharing) Check(field string) *FieldError {
	if s == nil {
		return nil
	}
	for _, list := range []struct {
		name string
		ids  []string
	}{{"allowedConsumers", s.AllowedConsumers}, {"deniedConsumers", s.DeniedConsumers}} {
		f := join(field, list.name)
		if err := CheckCount(f, len(list.ids), MaxSharingConsumers); err != nil {
			return err
		}
		for i, id := range list.ids {
			if err := CheckClusterID(Sub(f, i), id); err != nil {
				return err
			}
		}
	}
	if s.MaxChunksPerConsumer < 0 {
		return fieldErr(join(field, "maxChunksPerConsumer"), showInt(int64(s.MaxChunksPerConsumer)), "0 (no cap) or more")
	}
	return nil
}

// Check checks a topology: coordinates in range, texts short.
func (t *Topology) Check(field string) *FieldError {
	if t == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"zone", t.Zone}, {"region", t.Region}, {"city", t.City}} {
		if err := CheckText(join(field, f.name), f.v); err != nil {
			return err
		}
	}
	if err := CheckLatitude(join(field, "latitude"), t.Latitude); err != nil {
		return err
	}
	return CheckLongitude(join(field, "longitude"), t.Longitude)
}

// CheckCarbonData checks an advertisement's carbon fields: the current
// intensity and at most MaxCarbonForecast forecast values, each CheckCarbon.
func CheckCarbonData(current *float64, forecast []float64) *FieldError {
	if current != nil {
		if err := CheckCarbon("carbonIntensity", *current); err != nil {
			return err
		}
	}
	if err := CheckCount("carbonForecast", len(forecast), MaxCarbonForecast); err != nil {
		return err
	}
	for i, v := range forecast {
		if err := CheckCarbon(Sub("carbonForecast", i), v); err != nil {
			return err
		}
	}
	return nil
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(l))
}

// MaxBudget is the largest budget limit (per hour or per month), in the
// providers' currency: far above any real bill, small enough that every sum
// of the budget rule stays exact in a float64.
const MaxBudget = 1_000_000_000

// MaxBudgetValue is MaxBudget as a Quantity.
func MaxBudgetValue() resource.Quantity {
	return *resource.NewQuantity(MaxBudget, resource.DecimalSI)
}

// Check checks a budget: each limit a quantity from 0 to MaxBudget,
// warnAtPercent from 1 to 100.
func (b *Budget) Check(field string) *FieldError {
	if b == nil {
		return nil
	}
	for _, l := range []struct {
		name string
		q    *resource.Quantity
	}{{"perHour", b.PerHour}, {"perMonth", b.PerMonth}} {
		if l.q == nil {
			continue
		}
		if err := checkQuantityIn(join(field, l.name), *l.q, MaxBudgetValue(), "an amount from 0 to 1000000000 in the providers' currency, e.g. \"2.50\""); err != nil {
			return err
		}
	}
	if w := b.WarnAtPercent; w != nil && (*w < 1 || *w > 100) {
		return fieldErr(join(field, "warnAtPercent"), showInt(int64(*w)), "from 1 to 100 (percent of a limit)")
	}
	return nil
}

// MaxThreshold is the largest re-evaluation threshold (cost per hour,
// carbon per hour or RTT in ms).
const MaxThreshold = 1_000_000

// Check checks the thresholds: each a finite number from 0 to MaxThreshold.
func (t *Thresholds) Check(field string) *FieldError {
	if t == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"costPerHour", t.CostPerHour}, {"carbonPerHour", t.CarbonPerHour}, {"rttMillis", t.RTTMillis}} {
		if f.v == nil {
			continue
		}
		if err := checkNumber(join(field, f.name), *f.v, 0, MaxThreshold, "a finite number from 0 to 1000000"); err != nil {
			return err
		}
	}
	return nil
}
