package eco

import "math"

// shape describes a region's grid: a base intensity, an evening demand peak
// (served by fossil peakers) and a midday solar dip, both around local
// time, plus the region's UTC offset (standard time). The built-in
// profiles are computed from these once; see docs/mocks.md for the sources
// of the numbers.
type shape struct {
	region       string
	base         float64 // overnight/typical level, gCO2eq/kWh
	eveningPeak  float64 // added around 19:00 local
	solarDip     float64 // removed around 13:00 local
	utcOffsetHrs int
}

var shapes = []shape{
	{"QC", 30, 4, 0, -5},     // Quebec: ~94% hydro
	{"IDF", 45, 15, 5, 1},    // France: nuclear + hydro
	{"SP", 80, 25, 10, -3},   // Brazil: hydro-dominated, gas at peak
	{"ENG", 190, 60, 40, 0},  // Great Britain: gas + wind + nuclear
	{"CA", 230, 60, 110, -8}, // California: gas + large midday solar
	{"LOM", 290, 50, 60, 1},  // Italy: gas-heavy, solar
	{"HE", 380, 70, 110, 1},  // Germany: coal/gas + wind + solar
	{"SG", 480, 15, 5, 8},    // Singapore: ~95% natural gas
	{"13", 480, 40, 50, 9},   // Tokyo (TEPCO): gas + coal
	{"AB", 530, 40, 30, -7},  // Alberta: gas, coal retired in 2024
	{"MH", 690, 60, 40, 5},   // Maharashtra: coal-dominated (UTC+5:30 rounded)
	{"NSW", 710, 70, 60, 10}, // New South Wales: black coal
}

// bump is 1 at the center hour and falls to 0 three hours away.
func bump(hour, center int) float64 {
	d := (hour - center + 36) % 24
	d -= 12
	if d < -3 || d > 3 {
		return 0
	}
	return math.Cos(float64(d) * math.Pi / 6)
}

func (s shape) profile() []float64 {
	out := make([]float64, 24)
	for utc := range out {
		local := ((utc+s.utcOffsetHrs)%24 + 24) % 24
		v := s.base + s.eveningPeak*bump(local, 19) - s.solarDip*bump(local, 13)
		out[utc] = math.Round(v*10) / 10
	}
	return out
}

// DefaultRegions returns the built-in profiles of the 12 region codes.
func DefaultRegions() map[string][]float64 {
	m := make(map[string][]float64, len(shapes))
	for _, s := range shapes {
		m[s.region] = s.profile()
	}
	return m
}

// DefaultProfiles returns the built-in profiles.
func DefaultProfiles() *Profiles {
	p, err := NewProfiles(DefaultRegions())
	if err != nil {
		panic(err) // the built-in data is covered by tests
	}
	return p
}
