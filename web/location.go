package web

import (
	"strings"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// places is the cities a console's location picker offers
// (ConsoleOptions.Places), looked up by city name.
type places []api.Topology

// newPlaces keeps the usable places of list: a city name and coordinates
// the broker accepts, each city once.
func newPlaces(list []api.Topology) places {
	var out places
	seen := map[string]bool{}
	for _, p := range list {
		if p.City == "" || !p.HasCoordinates() || p.Check("location") != nil || seen[p.City] {
			continue
		}
		seen[p.City] = true
		out = append(out, p)
	}
	return out
}

// find returns the place named city ("" or unknown: not found).
func (ps places) find(city string) (api.Topology, bool) {
	for _, p := range ps {
		if p.City == city {
			return p, true
		}
	}
	return api.Topology{}, false
}

// form is the picker with city selected ("": the address's lookup) and
// current describing the location in force.
func (ps places) form(current string, city string) *views.LocationForm {
	if len(ps) == 0 {
		return nil
	}
	f := &views.LocationForm{Current: current}
	f.Cities = append(f.Cities, views.Option{Value: "", Label: "from the cluster's address (geo lookup)", Selected: city == ""})
	for _, p := range ps {
		f.Cities = append(f.Cities, views.Option{Value: p.City, Label: location(p.City, p.Region), Selected: p.City == city})
	}
	return f
}

// parse reads the picker's city: nil for the address's lookup, else the
// place (with its coordinates from the list, never from the form).
func (ps places) parse(city string) (*api.Topology, views.FieldErrors) {
	city = strings.TrimSpace(city)
	if city == "" {
		return nil, nil
	}
	p, ok := ps.find(city)
	if !ok {
		return nil, views.FieldErrors{"city": "City: " + api.ShowString(city) + " is not one of the listed cities; pick one from the list"}
	}
	return &p, nil
}

// locationSource says where a location comes from.
func locationSource(set bool) string {
	if set {
		return "set in this console"
	}
	return "from the cluster's address"
}

// sourced is a location with where it comes from ("—" stays "—": nothing
// known yet).
func sourced(loc string, set bool) string {
	if loc == dash {
		return dash
	}
	return loc + " (" + locationSource(set) + ")"
}
