// Package eco is mock-eco: a carbon-intensity service with 24-hour
// profiles per region (gCO2eq/kWh, indexed by UTC hour), answering
// `GET /carbon` and `GET /carbon/forecast` like the reference's mock. See
// docs/mocks.md.
package eco

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Profile is a region's carbon intensity for each UTC hour 0..23.
type Profile [24]float64

// Data is the --data file format: {"regions": {"QC": [24 numbers], ...}}.
type Data struct {
	Regions map[string][]float64 `json:"regions"`
}

// Profiles maps a region code to its profile. It is immutable once built.
type Profiles struct {
	byRegion map[string]Profile
}

// NewProfiles validates data: every region code non-empty, every profile
// exactly 24 finite, non-negative values.
func NewProfiles(regions map[string][]float64) (*Profiles, error) {
	if len(regions) == 0 {
		return nil, fmt.Errorf("no regions")
	}
	p := &Profiles{byRegion: map[string]Profile{}}
	for code, vals := range regions {
		if strings.TrimSpace(code) == "" {
			return nil, fmt.Errorf("empty region code")
		}
		if len(vals) != 24 {
			return nil, fmt.Errorf("region %s: %d values, want 24 (one per UTC hour, 00:00 first)", code, len(vals))
		}
		var prof Profile
		for h, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("region %s hour %d: %v is not a non-negative number of gCO2eq/kWh", code, h, v)
			}
			prof[h] = v
		}
		p.byRegion[code] = prof
	}
	return p, nil
}

// Regions returns the region codes, sorted.
func (p *Profiles) Regions() []string {
	out := make([]string, 0, len(p.byRegion))
	for r := range p.byRegion {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Profile returns the profile of region.
func (p *Profiles) Profile(region string) (Profile, bool) {
	prof, ok := p.byRegion[region]
	return prof, ok
}

// LoadData reads a --data file (JSON or YAML).
func LoadData(path string) (*Profiles, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read eco data: %w", err)
	}
	var d Data
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		return nil, fmt.Errorf("eco data %s: %w (expected {\"regions\": {\"QC\": [24 numbers, UTC hour 0 first], ...}})", path, err)
	}
	p, err := NewProfiles(d.Regions)
	if err != nil {
		return nil, fmt.Errorf("eco data %s: %w", path, err)
	}
	return p, nil
}

// CarbonResponse is the body of GET /carbon.
type CarbonResponse struct {
	Region          string  `json:"region"`
	CarbonIntensity float64 `json:"carbonIntensity"`
}

// ForecastResponse is the body of GET /carbon/forecast.
type ForecastResponse struct {
	Region   string    `json:"region"`
	Forecast []float64 `json:"forecast"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// Options configure the handler.
type Options struct {
	// Now is the clock; the current UTC hour selects the value.
	Now func() time.Time
	// Integers rounds every value to a whole number, for agents that decode
	// the forecast as integers (the reference's agents).
	Integers bool
}

// Handler serves GET /carbon, GET /carbon/forecast and GET /healthz.
func Handler(p *Profiles, opts Options) http.Handler {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	round := func(v float64) float64 {
		if opts.Integers {
			return math.Round(v)
		}
		return v
	}
	lookup := func(w http.ResponseWriter, r *http.Request) (string, Profile, bool) {
		region := r.URL.Query().Get("region")
		if region == "" {
			writeJSON(w, http.StatusBadRequest, errorResponse{Error: "missing 'region' query parameter"})
			return "", Profile{}, false
		}
		prof, ok := p.Profile(region)
		if !ok {
			writeJSON(w, http.StatusNotFound, errorResponse{Error: "unknown region: " + region})
			return "", Profile{}, false
		}
		return region, prof, true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /carbon", func(w http.ResponseWriter, r *http.Request) {
		region, prof, ok := lookup(w, r)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, CarbonResponse{Region: region, CarbonIntensity: round(prof[now().UTC().Hour()])})
	})
	mux.HandleFunc("GET /carbon/forecast", func(w http.ResponseWriter, r *http.Request) {
		region, prof, ok := lookup(w, r)
		if !ok {
			return
		}
		h := now().UTC().Hour()
		fc := make([]float64, 24)
		for i := range fc {
			fc[i] = round(prof[(h+i)%24])
		}
		writeJSON(w, http.StatusOK, ForecastResponse{Region: region, Forecast: fc})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
