// Package location holds the agents' clients for the geolocation and
// carbon-intensity services (mock-geo and mock-eco, or any service that
// speaks the same ip-api.com-style and carbon APIs). It is the seam where a
// real geo-IP or carbon API plugs in. See docs/mocks.md.
package location

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Timeout bounds every request to the services.
const Timeout = 5 * time.Second

// CarbonTTL is how long a region's carbon data is served from the cache.
const CarbonTTL = time.Hour

// maxBody bounds a response body.
const maxBody = 1 << 20

// maxGeoCache bounds the per-IP cache; addresses beyond it are looked up
// every time.
const maxGeoCache = 4096

// Location is where an address is.
type Location struct {
	Region    string
	City      string
	Latitude  float64
	Longitude float64
}

type geoResult struct {
	loc   Location
	found bool
}

// GeoClient resolves IP addresses with an ip-api.com-style `GET /json/{ip}`
// service. Answers, including "no location", are cached per IP for the
// life of the client; errors are not cached. Safe for concurrent use.
type GeoClient struct {
	base *url.URL
	http *http.Client

	mu    sync.Mutex
	cache map[string]geoResult
}

// NewGeoClient returns a client of the service at baseURL (http or https).
// A nil httpClient uses one with a 5 s timeout; every request is bounded by
// 5 s in any case.
func NewGeoClient(baseURL string, httpClient *http.Client) (*GeoClient, error) {
	u, err := parseBase(baseURL)
	if err != nil {
		return nil, fmt.Errorf("geo service URL: %w", err)
	}
	return &GeoClient{base: u, http: orDefault(httpClient), cache: map[string]geoResult{}}, nil
}

type geoResponse struct {
	Query      string  `json:"query"`
	Status     string  `json:"status"`
	Message    string  `json:"message"`
	Region     string  `json:"region"`
	RegionName string  `json:"regionName"`
	City       string  `json:"city"`
	Lat        float64 `json:"lat"`
	Lon        float64 `json:"lon"`
}

// Lookup returns the location of ip. found is false when the service knows
// no location for it (status "fail", or an empty region with lat = lon = 0).
// A transport error, a non-200 reply or an undecodable body is an error.
func (c *GeoClient) Lookup(ctx context.Context, ip string) (loc Location, found bool, err error) {
	addr, perr := netip.ParseAddr(ip)
	if perr != nil || addr.Zone() != "" {
		return Location{}, false, fmt.Errorf("geolocate %q: not an IP address", ip)
	}
	c.mu.Lock()
	r, ok := c.cache[ip]
	c.mu.Unlock()
	if ok {
		return r.loc, r.found, nil
	}
	var body geoResponse
	if err := getJSON(ctx, c.http, c.base.JoinPath("json", ip).String(), &body); err != nil {
		return Location{}, false, fmt.Errorf("geolocate %s: %w", ip, err)
	}
	switch {
	case body.Status == "fail":
	case body.Status != "success":
		return Location{}, false, fmt.Errorf("geolocate %s: unexpected status %q (want success or fail)", ip, body.Status)
	case body.Region == "" && body.Lat == 0 && body.Lon == 0:
	case api.CheckLatitude("lat", body.Lat) != nil || api.CheckLongitude("lon", body.Lon) != nil:
		return Location{}, false, fmt.Errorf("geolocate %s: coordinates %v,%v out of range", ip, body.Lat, body.Lon)
	default:
		r = geoResult{loc: Location{Region: body.Region, City: body.City, Latitude: body.Lat, Longitude: body.Lon}, found: true}
	}
	c.mu.Lock()
	if len(c.cache) < maxGeoCache {
		c.cache[ip] = r
	}
	c.mu.Unlock()
	return r.loc, r.found, nil
}

// Carbon is a region's carbon intensity in gCO2eq/kWh.
type Carbon struct {
	// Intensity is the current value: the forecast's first entry when a
	// forecast was available.
	Intensity float64
	// Forecast holds hourly values, the current hour first; nil when only
	// the current value was available.
	Forecast []float64
	// FetchedAt is when the service answered.
	FetchedAt time.Time
	// Stale is true when the last fetch failed and this is the cached value.
	Stale bool
}

// EcoClient reads carbon intensity from a mock-eco-style service:
// `GET /carbon/forecast?region=R` first, `GET /carbon?region=R` as the
// fallback. Results are cached per region for CarbonTTL; when a fetch fails
// the cached value (however old) is returned. Safe for concurrent use.
type EcoClient struct {
	base *url.URL
	http *http.Client
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]Carbon
}

// NewEcoClient returns a client of the service at baseURL. A nil httpClient
// uses one with a 5 s timeout; now is the clock (nil: time.Now).
func NewEcoClient(baseURL string, httpClient *http.Client, now func() time.Time) (*EcoClient, error) {
	u, err := parseBase(baseURL)
	if err != nil {
		return nil, fmt.Errorf("carbon service URL: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &EcoClient{base: u, http: orDefault(httpClient), now: now, cache: map[string]Carbon{}}, nil
}

// Carbon returns region's carbon intensity, from the cache when it is
// younger than CarbonTTL.
func (c *EcoClient) Carbon(ctx context.Context, region string) (Carbon, error) {
	if region == "" {
		return Carbon{}, errors.New("carbon intensity: empty region")
	}
	now := c.now()
	c.mu.Lock()
	cached, ok := c.cache[region]
	c.mu.Unlock()
	if ok && now.Sub(cached.FetchedAt) < CarbonTTL && !now.Before(cached.FetchedAt) {
		return cached, nil
	}
	fresh, err := c.fetch(ctx, region)
	if err != nil {
		if ok {
			cached.Stale = true
			return cached, nil
		}
		return Carbon{}, err
	}
	fresh.FetchedAt = now
	c.mu.Lock()
	c.cache[region] = fresh
	c.mu.Unlock()
	return fresh, nil
}

func (c *EcoClient) fetch(ctx context.Context, region string) (Carbon, error) {
	q := url.Values{"region": {region}}.Encode()
	fu := c.base.JoinPath("carbon", "forecast")
	fu.RawQuery = q
	var fc struct {
		Forecast []float64 `json:"forecast"`
	}
	ferr := getJSON(ctx, c.http, fu.String(), &fc)
	if ferr == nil {
		ferr = validValues(fc.Forecast)
	}
	if ferr == nil {
		return Carbon{Intensity: fc.Forecast[0], Forecast: fc.Forecast}, nil
	}
	cu := c.base.JoinPath("carbon")
	cu.RawQuery = q
	var cur struct {
		CarbonIntensity *float64 `json:"carbonIntensity"`
	}
	cerr := getJSON(ctx, c.http, cu.String(), &cur)
	if cerr == nil && cur.CarbonIntensity == nil {
		cerr = errors.New("no carbonIntensity in the reply")
	}
	if cerr == nil {
		cerr = validValues([]float64{*cur.CarbonIntensity})
	}
	if cerr != nil {
		return Carbon{}, fmt.Errorf("carbon intensity of %s: forecast: %v; current: %w", region, ferr, cerr)
	}
	return Carbon{Intensity: *cur.CarbonIntensity}, nil
}

// validValues checks carbon values with the broker's rule
// (api.CheckCarbonData): at least one, at most api.MaxCarbonForecast, each
// finite and within [0, api.MaxCarbonIntensity].
func validValues(vs []float64) error {
	if len(vs) == 0 {
		return errors.New("empty forecast")
	}
	if fe := api.CheckCarbonData(nil, vs); fe != nil {
		return fe
	}
	return nil
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: use http(s)://host[:port]", raw)
	}
	return u, nil
}

func orDefault(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: Timeout}
}

// getJSON GETs u within Timeout and decodes a 200 JSON body into v.
func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: HTTP %d: %s", u, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decode reply: %w", u, err)
	}
	return nil
}
