package geo

import (
	"sort"
	"strconv"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Cities of the built-in table: 12 real cities with their region codes
// (ISO 3166-2 subdivision codes as ip-api reports them) and coordinates.
var cities = []Place{
	{Region: "QC", RegionName: "Quebec", City: "Montreal", CountryCode: "CA", ContinentCode: "NA", Lat: 45.5019, Lon: -73.5674},
	{Region: "CA", RegionName: "California", City: "San Francisco", CountryCode: "US", ContinentCode: "NA", Lat: 37.7749, Lon: -122.4194},
	{Region: "AB", RegionName: "Alberta", City: "Calgary", CountryCode: "CA", ContinentCode: "NA", Lat: 51.0447, Lon: -114.0719},
	{Region: "IDF", RegionName: "Île-de-France", City: "Paris", CountryCode: "FR", ContinentCode: "EU", Lat: 48.8566, Lon: 2.3522},
	{Region: "ENG", RegionName: "England", City: "London", CountryCode: "GB", ContinentCode: "EU", Lat: 51.5074, Lon: -0.1278},
	{Region: "HE", RegionName: "Hesse", City: "Frankfurt am Main", CountryCode: "DE", ContinentCode: "EU", Lat: 50.1109, Lon: 8.6821},
	{Region: "NSW", RegionName: "New South Wales", City: "Sydney", CountryCode: "AU", ContinentCode: "OC", Lat: -33.8688, Lon: 151.2093},
	{Region: "13", RegionName: "Tokyo", City: "Tokyo", CountryCode: "JP", ContinentCode: "AS", Lat: 35.6762, Lon: 139.6503},
	{Region: "SG", RegionName: "Singapore", City: "Singapore", CountryCode: "SG", ContinentCode: "AS", Lat: 1.3521, Lon: 103.8198},
	{Region: "LOM", RegionName: "Lombardy", City: "Milan", CountryCode: "IT", ContinentCode: "EU", Lat: 45.4642, Lon: 9.1900},
	{Region: "SP", RegionName: "São Paulo", City: "São Paulo", CountryCode: "BR", ContinentCode: "SA", Lat: -23.5505, Lon: -46.6333},
	{Region: "MH", RegionName: "Maharashtra", City: "Mumbai", CountryCode: "IN", ContinentCode: "AS", Lat: 19.0760, Lon: 72.8777},
}

// loopbackOrder assigns 127.0.N.0/24 (N = index+1) to a region code.
var loopbackOrder = []string{"NSW", "QC", "IDF", "ENG", "13", "HE", "SP", "MH", "AB", "LOM", "SG", "CA"}

// labBlocks are the reference's four /24s: in each, the .0/26 and .192/26
// blocks share the first city, .64/26 and .128/26 have the second and third.
var labBlocks = []struct {
	prefix  string
	regions [3]string
}{
	{"172.23.4", [3]string{"QC", "CA", "AB"}},
	{"172.23.6", [3]string{"IDF", "ENG", "HE"}},
	{"172.23.7", [3]string{"NSW", "13", "SG"}},
	{"172.23.22", [3]string{"LOM", "SP", "MH"}},
}

func city(region string) Location {
	for _, c := range cities {
		if c.Region == region {
			c.ISP = "Federation Autoscaler mock-geo"
			c.Org = "mock-geo " + c.City
			c.AS = "AS64500 Federation Autoscaler mock-geo"
			return Location{Place: c}
		}
	}
	panic("geo: unknown built-in region " + region)
}

// DefaultEntries returns the built-in table: the reference's 172.23.x /26
// blocks and one loopback /24 per city (see docs/mocks.md).
func DefaultEntries() []Location {
	var out []Location
	for _, b := range labBlocks {
		for i, suffix := range []string{".0/26", ".64/26", ".128/26", ".192/26"} {
			reg := b.regions[0]
			if i == 1 || i == 2 {
				reg = b.regions[i]
			}
			l := city(reg)
			l.CIDR = b.prefix + suffix
			out = append(out, l)
		}
	}
	for i, reg := range loopbackOrder {
		l := city(reg)
		l.CIDR = "127.0." + strconv.Itoa(i+1) + ".0/24"
		out = append(out, l)
	}
	return out
}

// DefaultTable returns the built-in table.
func DefaultTable() *Table {
	t, err := NewTable(DefaultEntries())
	if err != nil {
		panic(err) // the built-in data is covered by tests
	}
	return t
}

// LoopbackAddress returns an address in the loopback range of region (for
// demos: 127.0.N.<host>), and false for a region without one.
func LoopbackAddress(region string, host byte) (string, bool) {
	for i, reg := range loopbackOrder {
		if reg == region {
			return "127.0." + strconv.Itoa(i+1) + "." + strconv.Itoa(int(host)), true
		}
	}
	return "", false
}

// Places returns the built-in table's cities (region, city, coordinates),
// sorted by city: what the consoles' location pickers offer.
func Places() []api.Topology {
	out := make([]api.Topology, 0, len(cities))
	for _, c := range cities {
		out = append(out, api.Topology{Region: c.Region, City: c.City, Latitude: c.Lat, Longitude: c.Lon})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].City < out[j].City })
	return out
}

// Home returns the built-in city of region (false for a region the table
// lacks).
func Home(region string) (api.Topology, bool) {
	for _, c := range cities {
		if c.Region == region {
			return api.Topology{Region: c.Region, City: c.City, Latitude: c.Lat, Longitude: c.Lon}, true
		}
	}
	return api.Topology{}, false
}
