package location

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/eco"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/geo"
)

// counting wraps h and counts requests per path.
type counting struct {
	h     http.Handler
	total atomic.Int64
	fail  atomic.Bool // when set, every request gets 500
	mu    sync.Mutex
	paths map[string]int
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.total.Add(1)
	c.mu.Lock()
	if c.paths == nil {
		c.paths = map[string]int{}
	}
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	if c.fail.Load() {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	c.h.ServeHTTP(w, r)
}

func TestGeoClient(t *testing.T) {
	h := &counting{h: geo.Handler(geo.DefaultTable())}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := NewGeoClient(srv.URL+"/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	tests := []struct {
		ip       string
		found    bool
		region   string
		city     string
		lat, lon float64
	}{
		{ip: "127.0.3.5", found: true, region: "IDF", city: "Paris", lat: 48.8566, lon: 2.3522},
		{ip: "127.0.1.9", found: true, region: "NSW", city: "Sydney", lat: -33.8688, lon: 151.2093},
		{ip: "172.23.22.200", found: true, region: "LOM", city: "Milan", lat: 45.4642, lon: 9.19},
		{ip: "8.8.8.8", found: false},
		{ip: "127.0.0.1", found: false},
		{ip: "::1", found: false},
	}
	for _, tt := range tests {
		loc, found, err := c.Lookup(ctx, tt.ip)
		if err != nil {
			t.Fatalf("%s: %v", tt.ip, err)
		}
		want := Location{Region: tt.region, City: tt.city, Latitude: tt.lat, Longitude: tt.lon}
		if found != tt.found || loc != want {
			t.Errorf("%s: %+v,%v want %+v,%v", tt.ip, loc, found, want, tt.found)
		}
	}
	before := h.total.Load()
	h.fail.Store(true) // the cache answers without the service
	for _, tt := range tests {
		if _, found, err := c.Lookup(ctx, tt.ip); err != nil || found != tt.found {
			t.Errorf("cached %s: %v %v", tt.ip, found, err)
		}
	}
	if h.total.Load() != before {
		t.Fatalf("cached lookups hit the service %d times", h.total.Load()-before)
	}
	// Non-200 is an error and is not cached.
	if _, _, err := c.Lookup(ctx, "127.0.4.1"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("non-200: %v", err)
	}
	h.fail.Store(false)
	if loc, found, err := c.Lookup(ctx, "127.0.4.1"); err != nil || !found || loc.City != "London" {
		t.Fatalf("after recovery: %+v %v %v", loc, found, err)
	}
	for _, bad := range []string{"", "../healthz", "not-an-ip", "fe80::1%eth0"} {
		n := h.total.Load()
		if _, _, err := c.Lookup(ctx, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if h.total.Load() != n {
			t.Errorf("%q reached the service", bad)
		}
	}
}

func TestGeoClientOddReplies(t *testing.T) {
	tests := []struct {
		body    string
		found   bool
		wantErr bool
	}{
		{body: `{"query":"1.2.3.4","status":"fail","message":"invalid query"}`},
		{body: `{"query":"1.2.3.4","status":"success","region":"","lat":0,"lon":0,"city":"X"}`},
		{body: `{"query":"1.2.3.4","status":"success","lat":10,"lon":20}`, found: true},
		{body: `{"query":"1.2.3.4","status":"weird"}`, wantErr: true},
		{body: `{"status":"success","region":"R","lat":100,"lon":0}`, wantErr: true},
		{body: `not json`, wantErr: true},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tt.body)) }))
		c, _ := NewGeoClient(srv.URL, srv.Client())
		_, found, err := c.Lookup(context.Background(), "1.2.3.4")
		srv.Close()
		if (err != nil) != tt.wantErr || found != tt.found {
			t.Errorf("%s: found=%v err=%v", tt.body, found, err)
		}
	}
	if _, err := NewGeoClient("ftp://x", nil); err == nil {
		t.Error("ftp URL accepted")
	}
}

func TestGeoClientTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := NewGeoClient(srv.URL, srv.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Lookup(ctx, "1.2.3.4"); err == nil {
		t.Fatal("a hung service did not time out")
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time      { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Add(d time.Duration) { f.mu.Lock(); f.t = f.t.Add(d); f.mu.Unlock() }

func TestEcoClient(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 7, 22, 9, 10, 0, 0, time.UTC)}
	profiles := eco.DefaultProfiles()
	h := &counting{h: eco.Handler(profiles, eco.Options{Now: clock.Now})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := NewEcoClient(srv.URL, srv.Client(), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nsw, _ := profiles.Profile("NSW")

	got, err := c.Carbon(ctx, "NSW")
	if err != nil {
		t.Fatal(err)
	}
	if got.Intensity != nsw[9] || len(got.Forecast) != 24 || got.Forecast[1] != nsw[10] || got.Stale {
		t.Fatalf("NSW at 09 UTC = %+v, profile %v", got, nsw)
	}
	if h.paths["/carbon"] != 0 {
		t.Fatal("the fallback was used although the forecast worked")
	}
	// Within the hour: cached.
	clock.Add(59 * time.Minute)
	n := h.total.Load()
	if again, err := c.Carbon(ctx, "NSW"); err != nil || again.Intensity != got.Intensity || h.total.Load() != n {
		t.Fatalf("cached read: %+v %v, %d requests", again, err, h.total.Load()-n)
	}
	// After an hour: fetched again (now 10 UTC).
	clock.Add(2 * time.Minute)
	fresh, err := c.Carbon(ctx, "NSW")
	if err != nil || fresh.Intensity != nsw[10] || h.total.Load() == n {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	// A failed fetch serves the cached value, marked stale.
	h.fail.Store(true)
	clock.Add(2 * time.Hour)
	stale, err := c.Carbon(ctx, "NSW")
	if err != nil || !stale.Stale || stale.Intensity != nsw[10] {
		t.Fatalf("stale: %+v %v", stale, err)
	}
	// …and with nothing cached, the error.
	if _, err := c.Carbon(ctx, "QC"); err == nil {
		t.Fatal("failed fetch without a cache returned no error")
	}
	h.fail.Store(false)
	if _, err := c.Carbon(ctx, "XX"); err == nil || !strings.Contains(err.Error(), "unknown region: XX") {
		t.Fatalf("unknown region: %v", err)
	}
	if _, err := c.Carbon(ctx, ""); err == nil {
		t.Fatal("empty region accepted")
	}
}

func TestEcoClientFallbackAndIntegers(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 7, 22, 3, 0, 0, 0, time.UTC)}
	p, err := eco.NewProfiles(map[string][]float64{"R": {10.4, 11, 12, 13.6, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		handler       http.Handler
		wantIntensity float64
		wantForecast  bool
	}{
		{"integers", eco.Handler(p, eco.Options{Now: clock.Now, Integers: true}), 14, true},
		{"decimals", eco.Handler(p, eco.Options{Now: clock.Now}), 13.6, true},
		{"forecast 500 → /carbon", forecastBroken(eco.Handler(p, eco.Options{Now: clock.Now}), http.StatusInternalServerError, ""), 13.6, false},
		{"empty forecast → /carbon", forecastBroken(eco.Handler(p, eco.Options{Now: clock.Now}), http.StatusOK, `{"region":"R","forecast":[]}`), 13.6, false},
		{"integer /carbon", forecastBroken(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"region":"R","carbonIntensity":42}`))
		}), http.StatusNotFound, ""), 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			c, _ := NewEcoClient(srv.URL, srv.Client(), clock.Now)
			got, err := c.Carbon(context.Background(), "R")
			if err != nil {
				t.Fatal(err)
			}
			if got.Intensity != tt.wantIntensity || (got.Forecast != nil) != tt.wantForecast {
				t.Fatalf("got %+v", got)
			}
		})
	}
	// Negative values and a missing field are errors.
	for _, body := range []string{`{"carbonIntensity":-1}`, `{"region":"R"}`} {
		srv := httptest.NewServer(forecastBroken(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }), 500, ""))
		c, _ := NewEcoClient(srv.URL, srv.Client(), clock.Now)
		if _, err := c.Carbon(context.Background(), "R"); err == nil {
			t.Errorf("%s accepted", body)
		}
		srv.Close()
	}
}

// forecastBroken answers /carbon/forecast itself (code, body) and passes
// everything else to h.
func forecastBroken(h http.Handler, code int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/carbon/forecast" {
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
			return
		}
		h.ServeHTTP(w, r)
	})
}
