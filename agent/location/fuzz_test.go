package location

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
)

// answer is a transport that answers every request with body (no network).
type answer []byte

func (a answer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a)), Request: r}, nil
}

// FuzzGeoAnswer: whatever the location service answers, a found location
// has coordinates the broker accepts.
func FuzzGeoAnswer(f *testing.F) {
	f.Add([]byte(`{"status":"success","regionName":"Lombardy","city":"Milan","lat":45.46,"lon":9.19}`))
	f.Add([]byte(`{"status":"success","region":"x","lat":999,"lon":9e307}`))
	f.Add([]byte(`{"status":"fail"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := NewGeoClient("http://geo.invalid", &http.Client{Transport: answer(body)})
		if err != nil {
			t.Fatal(err)
		}
		loc, found, err := c.Lookup(context.Background(), "192.0.2.1")
		if err != nil || !found {
			return
		}
		if fe := api.CheckLatitude("lat", loc.Latitude); fe != nil {
			t.Fatalf("found %+v in %q: %v", loc, body, fe)
		}
		if fe := api.CheckLongitude("lon", loc.Longitude); fe != nil {
			t.Fatalf("found %+v in %q: %v", loc, body, fe)
		}
		if err := apitest.WithinLimits(loc); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzEcoAnswer: whatever the carbon service answers (the same body for the
// forecast and the current value), an accepted carbon reading is one the
// broker accepts.
func FuzzEcoAnswer(f *testing.F) {
	f.Add([]byte(`{"region":"eu","forecast":[55,60,58]}`))
	f.Add([]byte(`{"carbonIntensity":9e307}`))
	f.Add([]byte(`{"forecast":[1e300]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := NewEcoClient("http://eco.invalid", &http.Client{Transport: answer(body)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Carbon(context.Background(), "eu")
		if err != nil {
			return
		}
		if fe := api.CheckCarbonData(&got.Intensity, got.Forecast); fe != nil {
			t.Fatalf("accepted %+v from %q: %v", got, body, fe)
		}
	})
}
