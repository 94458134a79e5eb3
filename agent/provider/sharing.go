package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// maxConfigFile bounds a configuration file; real ones are a few hundred
// bytes.
const maxConfigFile = 1 << 20

// SharingConfig is what a provider lends, at what price and to whom: the
// --sharing-file format and what the provider console writes.
type SharingConfig struct {
	// UnitPrices is the price per unit-hour by resource (cpu per core-hour,
	// memory per GiB-hour, nvidia.com/gpu per GPU-hour). Empty: unpriced.
	UnitPrices corev1.ResourceList `json:"unitPrices,omitempty"`
	// Capacity caps what is advertised, per resource: a percentage of the
	// free amount or a fixed Quantity.
	Capacity map[corev1.ResourceName]Cap `json:"capacity,omitempty"`
	// Renewable declares the provider's power renewable.
	Renewable bool `json:"renewable,omitempty"`
	// AllowedConsumers (empty: everyone), DeniedConsumers (wins) and
	// MaxChunksPerConsumer (0: no cap) are the "with whom" rules.
	AllowedConsumers     []string `json:"allowedConsumers,omitempty"`
	DeniedConsumers      []string `json:"deniedConsumers,omitempty"`
	MaxChunksPerConsumer int32    `json:"maxChunksPerConsumer,omitempty"`
	// Location, when set, is where the provider says it is, instead of
	// what the geo service finds for its address: the advertisement's
	// topology, and the region its carbon intensity is read for. It needs
	// coordinates (the broker's distances use them).
	Location *api.Topology `json:"location,omitempty"`
}

// Cap limits one resource: exactly one of Percent and Fixed is set.
type Cap struct {
	// Percent advertises this share (0–100) of the free amount.
	Percent *int32
	// Fixed advertises at most this amount.
	Fixed *resource.Quantity
}

// String renders c the way the sharing file spells it.
func (c Cap) String() string {
	switch {
	case c.Percent != nil:
		return strconv.Itoa(int(*c.Percent)) + "%"
	case c.Fixed != nil:
		return c.Fixed.String()
	default:
		return ""
	}
}

// MarshalJSON writes "N%" or the Quantity.
func (c Cap) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// UnmarshalJSON reads the sharing-file form: a bare integer or "N%" is a
// percentage; any other string is a fixed Quantity ("4", "8Gi", "500m").
func (c *Cap) UnmarshalJSON(b []byte) error { return c.parse(b, false) }

// parse reads a cap; legacy selects the reference capacity.yaml rules where
// a quoted bare integer is also a percentage (§9.1).
func (c *Cap) parse(b []byte, legacy bool) error {
	*c = Cap{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '"' {
		n, err := strconv.ParseInt(string(b), 10, 32)
		if err != nil {
			return fmt.Errorf("capacity cap %s: a bare number must be an integer percentage (write \"N%%\" or a Quantity such as \"8Gi\")", b)
		}
		p := int32(n)
		c.Percent = &p
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("capacity cap %s: %w", b, err)
	}
	s = strings.TrimSpace(s)
	if num, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 32)
		if err != nil {
			return fmt.Errorf("capacity cap %q: the percentage must be an integer", s)
		}
		p := int32(n)
		c.Percent = &p
		return nil
	}
	if legacy {
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			p := int32(n)
			c.Percent = &p
			return nil
		}
	}
	if fe := api.CheckQuantityText("capacity cap", s); fe != nil {
		return fe
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("capacity cap %q: neither a percentage nor a Quantity: %w", s, err)
	}
	c.Fixed = &q
	return nil
}

// Validate checks every field with the broker's rules (server/api: the
// same limits the broker applies to the advertisement) and says what to fix.
func (s *SharingConfig) Validate() error {
	var errs []error
	add := func(fe *api.FieldError) {
		if fe != nil {
			errs = append(errs, fe)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.UnitPrices)) {
		f := api.Sub("unitPrices", name)
		add(api.CheckResourceName(f, name))
		add(api.CheckUnitPrice(f, s.UnitPrices[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Capacity)) {
		c, f := s.Capacity[name], api.Sub("capacity", name)
		add(api.CheckResourceName(f, name))
		switch {
		case c.Percent == nil && c.Fixed == nil:
			errs = append(errs, fmt.Errorf("%s: empty cap", f))
		case c.Percent != nil:
			add(api.CheckPercent(f, int64(*c.Percent)))
		default:
			add(api.CheckQuantity(f, *c.Fixed))
		}
	}
	add(s.rules().Check(""))
	if s.Location != nil {
		add(s.Location.Check("location"))
		if !s.Location.HasCoordinates() {
			errs = append(errs, errors.New("location: give its latitude and longitude (0, 0 counts as none), or leave location out to use the address's"))
		}
	}
	return errors.Join(errs...)
}

// rules is the wire form of the "with whom" rules, never nil.
func (s *SharingConfig) rules() *api.Sharing {
	return &api.Sharing{
		AllowedConsumers:     slices.Clone(s.AllowedConsumers),
		DeniedConsumers:      slices.Clone(s.DeniedConsumers),
		MaxChunksPerConsumer: s.MaxChunksPerConsumer,
	}
}

// Sharing returns the wire form of the "with whom" rules, nil when there
// are none.
func (s *SharingConfig) Sharing() *api.Sharing {
	if len(s.AllowedConsumers) == 0 && len(s.DeniedConsumers) == 0 && s.MaxChunksPerConsumer == 0 {
		return nil
	}
	return s.rules()
}

// Allows reports whether consumer may borrow under these rules.
func (s *SharingConfig) Allows(consumer string) bool {
	if slices.Contains(s.DeniedConsumers, consumer) {
		return false
	}
	return len(s.AllowedConsumers) == 0 || slices.Contains(s.AllowedConsumers, consumer)
}

// DeepCopy returns an independent copy.
func (s *SharingConfig) DeepCopy() SharingConfig {
	out := SharingConfig{
		UnitPrices:           s.UnitPrices.DeepCopy(),
		Renewable:            s.Renewable,
		AllowedConsumers:     slices.Clone(s.AllowedConsumers),
		DeniedConsumers:      slices.Clone(s.DeniedConsumers),
		MaxChunksPerConsumer: s.MaxChunksPerConsumer,
	}
	if s.Location != nil {
		loc := *s.Location
		out.Location = &loc
	}
	if s.Capacity != nil {
		out.Capacity = make(map[corev1.ResourceName]Cap, len(s.Capacity))
		for k, c := range s.Capacity {
			var cc Cap
			if c.Percent != nil {
				p := *c.Percent
				cc.Percent = &p
			}
			if c.Fixed != nil {
				q := c.Fixed.DeepCopy()
				cc.Fixed = &q
			}
			out.Capacity[k] = cc
		}
	}
	return out
}

// ParseSharing parses a --sharing-file (YAML or JSON). Unknown fields are
// refused so a typo is not silently ignored.
func ParseSharing(data []byte) (SharingConfig, error) {
	var cfg SharingConfig
	if len(data) > maxConfigFile {
		return cfg, fmt.Errorf("sharing configuration is %d bytes, over the %d limit", len(data), maxConfigFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	if err := screenQuantities(data, "unitPrices"); err != nil {
		return SharingConfig{}, fmt.Errorf("parsing the sharing configuration: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return SharingConfig{}, fmt.Errorf("parsing the sharing configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return SharingConfig{}, fmt.Errorf("invalid sharing configuration: %w", err)
	}
	return cfg, nil
}

// screenQuantities checks the quantity text under keys of a YAML document
// before it is decoded (api.ScreenQuantities: resource.ParseQuantity can
// spend minutes on a 12-byte exponent). A document that is not YAML is
// left to the decoder to refuse.
func screenQuantities(data []byte, keys ...string) error {
	doc, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil
	}
	if fe := api.ScreenQuantities(doc, keys...); fe != nil {
		return fe
	}
	return nil
}

// ParsePrices parses the reference prices.yaml: resource name → Quantity
// (quoted string or number). An empty file means unpriced.
func ParsePrices(data []byte) (corev1.ResourceList, error) {
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("price file is %d bytes, over the %d limit", len(data), maxConfigFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var out corev1.ResourceList
	if err := screenQuantities(data, ""); err != nil {
		return nil, fmt.Errorf("parsing the price file: %w", err)
	}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("parsing the price file (want resource: \"price\" lines): %w", err)
	}
	cfg := SharingConfig{UnitPrices: out}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid price file: %w", err)
	}
	return out, nil
}

// ParseCapacity parses the reference capacity.yaml: resource name → a
// percentage (80, "80", "80%") or a Quantity with a unit ("8Gi", "4000m").
func ParseCapacity(data []byte) (map[corev1.ResourceName]Cap, error) {
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("capacity file is %d bytes, over the %d limit", len(data), maxConfigFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var raw map[corev1.ResourceName]json.RawMessage
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parsing the capacity file (want resource: percent or quantity lines): %w", err)
	}
	out := make(map[corev1.ResourceName]Cap, len(raw))
	for name, v := range raw {
		var c Cap
		if err := c.parse(v, true); err != nil {
			return nil, fmt.Errorf("capacity file, %s: %w", name, err)
		}
		out[name] = c
	}
	cfg := SharingConfig{Capacity: out}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid capacity file: %w", err)
	}
	return out, nil
}

// ParseRenewable parses the reference renewable.yaml: {renewable: bool}.
func ParseRenewable(data []byte) (bool, error) {
	if len(data) > maxConfigFile {
		return false, fmt.Errorf("renewable file is %d bytes, over the %d limit", len(data), maxConfigFile)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return false, nil
	}
	var v struct {
		Renewable bool `json:"renewable"`
	}
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		return false, fmt.Errorf("parsing the renewable file (want renewable: true|false): %w", err)
	}
	return v.Renewable, nil
}

// Capped is an advertisement's capacity after the caps.
type Capped struct {
	Resources corev1.ResourceList
	// ScalePercent lists the resources advertised below 100 % by a
	// percentage cap.
	ScalePercent map[string]int32
	// Fixed lists the fixed caps that actually lowered the amount.
	Fixed corev1.ResourceList
}

// ApplyCaps applies caps to the free amounts (reference §9.1): a percentage
// P < 100 advertises milli-value × P ÷ 100 (integer division, same format);
// a fixed cap advertises min(cap, free). Caps on resources that are not
// free are ignored.
func ApplyCaps(free corev1.ResourceList, caps map[corev1.ResourceName]Cap) Capped {
	out := Capped{Resources: free.DeepCopy()}
	for name, c := range caps {
		q, ok := out.Resources[name]
		if !ok {
			continue
		}
		switch {
		case c.Percent != nil && *c.Percent >= 0 && *c.Percent < 100:
			p := *c.Percent
			out.Resources[name] = scalePercent(q, p)
			if out.ScalePercent == nil {
				out.ScalePercent = map[string]int32{}
			}
			out.ScalePercent[string(name)] = p
		case c.Fixed != nil && c.Fixed.Cmp(q) < 0:
			out.Resources[name] = c.Fixed.DeepCopy()
			if out.Fixed == nil {
				out.Fixed = corev1.ResourceList{}
			}
			out.Fixed[name] = c.Fixed.DeepCopy()
		}
	}
	return out
}

// scalePercent is q × p ÷ 100 in whole milli-units, rounded down (q itself
// counted in milli-units rounded up, as Quantity.MilliValue does), in q's
// format. It is exact for any amount: milli-value × p overflows int64 above
// ~92 TB of memory.
func scalePercent(q resource.Quantity, p int32) resource.Quantity {
	milli := new(inf.Dec).Round(new(inf.Dec).Mul(q.AsDec(), inf.NewDec(1000, 0)), 0, inf.RoundCeil)
	scaled := new(inf.Dec).QuoRound(new(inf.Dec).Mul(milli, inf.NewDec(int64(p), 0)), inf.NewDec(100, 0), 0, inf.RoundDown)
	if u, ok := scaled.Unscaled(); ok {
		return *resource.NewMilliQuantity(u, q.Format)
	}
	return *resource.NewDecimalQuantity(*new(inf.Dec).SetUnscaledBig(scaled.UnscaledBig()).SetScale(3), q.Format)
}
