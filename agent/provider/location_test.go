package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestLocationOverride: a location in the sharing configuration is
// advertised instead of the geo service's, and the carbon intensity is its
// region's; it must have coordinates.
func TestLocationOverride(t *testing.T) {
	paris := &api.Topology{Region: "IDF", City: "Paris", Latitude: 48.8566, Longitude: 2.3522}
	tokyo := &api.Topology{Region: "13", City: "Tokyo", Latitude: 35.6762, Longitude: 139.6503}
	carbon := map[string]float64{"IDF": 45, "13": 460}
	cases := []struct {
		name       string
		set        *api.Topology
		geoErr     error
		wantCity   string
		wantCarbon float64
	}{
		{"the address's", nil, nil, "Paris", 45},
		{"set: moved to Tokyo", tokyo, nil, "Tokyo", 460},
		{"set, geo service down", tokyo, errors.New("down"), "Tokyo", 460},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Agent{cfg: Config{
				Geo: func(context.Context, string) (*api.Topology, error) {
					if c.geoErr != nil {
						return nil, c.geoErr
					}
					p := *paris
					return &p, nil
				},
				Carbon: func(_ context.Context, region string) (*float64, []float64, error) {
					v := carbon[region]
					return &v, nil, nil
				},
			}}
			var req api.AdvertisementRequest
			a.locate(context.Background(), "127.0.3.10", c.set, &req)
			if req.Topology == nil || req.Topology.City != c.wantCity {
				t.Fatalf("advertised topology %+v, want %s", req.Topology, c.wantCity)
			}
			if req.CarbonIntensity == nil || *req.CarbonIntensity != c.wantCarbon {
				t.Fatalf("carbon %v, want %v (the region of the location in force)", req.CarbonIntensity, c.wantCarbon)
			}
			if c.set != nil && req.Topology == c.set {
				t.Fatal("the advertisement shares the configuration's topology; it must be a copy")
			}
		})
	}

	for _, bad := range []struct {
		yaml, want string
	}{
		{"location: {city: Nowhere}\n", "latitude and longitude"},
		{"location: {city: Paris, latitude: 91, longitude: 2}\n", "latitude"},
	} {
		cfg, err := ParseSharing([]byte(bad.yaml))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one about %s", bad.yaml, err, bad.want)
		}
	}
	cfg, err := ParseSharing([]byte("location: {region: \"13\", city: Tokyo, latitude: 35.6762, longitude: 139.6503}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.Location == nil || *cfg.Location != *tokyo {
		t.Fatalf("a sharing file with a location: %+v, %v", cfg.Location, err)
	}
	if cp := cfg.DeepCopy(); cp.Location == cfg.Location || *cp.Location != *cfg.Location {
		t.Fatal("DeepCopy shares or loses the location")
	}
}
