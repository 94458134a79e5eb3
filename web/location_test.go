package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
	"github.com/federation-autoscaler/federation-autoscaler/web/webfake"
)

// TestProviderLocationPicker: the provider console sets the location from
// its list of places (coordinates from the list, never from the form),
// refuses a city it does not list, and clears it back to the address's.
func TestProviderLocationPicker(t *testing.T) {
	fed := webfake.New(nil)
	id := fed.ProviderIDs()[0]
	tok, _ := auth.NewStaticToken(testToken)
	places := []api.Topology{
		{Region: "13", City: "Tokyo", Latitude: 35.6762, Longitude: 139.6503},
		{Region: "NSW", City: "Sydney", Latitude: -33.8688, Longitude: 151.2093},
		{City: "Null Island"}, // no coordinates: never offered
	}
	pc, err := web.NewProviderConsole(fed.Provider(id), web.ConsoleOptions{SiteOptions: web.SiteOptions{Token: tok}, Places: places})
	if err != nil {
		t.Fatal(err)
	}
	b := &browserSim{t: t, app: pc.App()}
	csrf := b.login(testToken)
	_, page := b.do(http.MethodGet, "/", nil)
	if !strings.Contains(page, `<option value="Tokyo"`) || strings.Contains(page, "Null Island") {
		t.Fatalf("the picker must offer the usable places only:\n%s", page)
	}
	cases := []struct {
		city     string
		want     int
		wantCity string // "" : no location set
		wantText string
	}{
		{"Tokyo", http.StatusSeeOther, "Tokyo", "Tokyo, 13 (set in this console)"},
		{"Atlantis", http.StatusUnprocessableEntity, "Tokyo", "is not one of the listed cities"},
		{"", http.StatusSeeOther, "", "(from the cluster&#39;s address)"},
	}
	for _, c := range cases {
		resp, body := b.do(http.MethodPost, "/location", url.Values{"_csrf": {csrf}, "city": {c.city}})
		if resp.StatusCode != c.want {
			t.Fatalf("city %q: %d, want %d\n%s", c.city, resp.StatusCode, c.want, body)
		}
		cfg, _ := fed.Provider(id).SharingConfig(context.Background())
		switch {
		case c.wantCity == "" && cfg.Location != nil:
			t.Fatalf("city %q: location %+v still set", c.city, cfg.Location)
		case c.wantCity != "" && (cfg.Location == nil || cfg.Location.City != c.wantCity || cfg.Location.Latitude != 35.6762):
			t.Fatalf("city %q: location %+v, want %s with the list's coordinates", c.city, cfg.Location, c.wantCity)
		}
		if resp.StatusCode == http.StatusSeeOther {
			_, body = b.do(http.MethodGet, "/?ok=location", nil)
		}
		if !strings.Contains(body, c.wantText) {
			t.Fatalf("city %q: the page lacks %q:\n%s", c.city, c.wantText, body)
		}
	}
	if resp, _ := b.do(http.MethodPost, "/location", url.Values{"city": {"Tokyo"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a location without its CSRF token: %d, want 403", resp.StatusCode)
	}
}

// TestNoPlacesNoPicker: without places the console has no picker and no
// route for it.
func TestNoPlacesNoPicker(t *testing.T) {
	b := &browserSim{t: t, app: providerApp(t, webfake.New(nil), webfake.New(nil).ProviderIDs()[0])}
	csrf := b.login(testToken)
	if _, page := b.do(http.MethodGet, "/", nil); strings.Contains(page, `action="/location"`) {
		t.Fatal("a picker without places")
	}
	if resp, _ := b.do(http.MethodPost, "/location", url.Values{"_csrf": {csrf}, "city": {"Tokyo"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /location without places: %d, want 404", resp.StatusCode)
	}
}
