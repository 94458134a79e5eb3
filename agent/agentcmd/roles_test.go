package agentcmd

import (
	"context"
	"errors"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/agent/location"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// fakeGeo answers one lookup the way the test says.
type fakeGeo struct {
	loc   location.Location
	found bool
	err   error
}

func (g fakeGeo) Lookup(context.Context, string) (location.Location, bool, error) {
	return g.loc, g.found, g.err
}

func TestGeoLookup(t *testing.T) {
	paris := location.Location{Region: "IDF", City: "Paris", Latitude: 48.8566, Longitude: 2.3522}
	down := errors.New("geo service down")
	toTopology := func(l location.Location) *api.Topology {
		return &api.Topology{Region: l.Region, City: l.City, Latitude: l.Latitude, Longitude: l.Longitude}
	}
	for _, tt := range []struct {
		name    string
		geo     fakeGeo
		want    *api.Topology
		wantErr error
	}{
		{"found", fakeGeo{loc: paris, found: true}, &api.Topology{Region: "IDF", City: "Paris", Latitude: 48.8566, Longitude: 2.3522}, nil},
		{"unknown address: no location, no error", fakeGeo{}, nil, nil},
		{"error: no location, the error", fakeGeo{loc: paris, found: true, err: down}, nil, down},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := geoLookup(tt.geo, toTopology)(context.Background(), "192.0.2.1")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("location = %+v, want %+v", got, tt.want)
			}
		})
	}
}
