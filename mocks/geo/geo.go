// Package geo is mock-geo: an ip-api.com-compatible geolocation service
// (`GET /json/{ip}`) backed by a small CIDR table, so a federation run on
// one machine or in a lab network has geography. See docs/mocks.md.
package geo

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Place is what an address resolves to: ip-api's location fields.
type Place struct {
	ContinentCode string  `json:"continentCode,omitempty"`
	CountryCode   string  `json:"countryCode,omitempty"`
	Region        string  `json:"region,omitempty"`
	RegionName    string  `json:"regionName,omitempty"`
	City          string  `json:"city,omitempty"`
	Lat           float64 `json:"lat,omitempty"`
	Lon           float64 `json:"lon,omitempty"`
	ISP           string  `json:"isp,omitempty"`
	Org           string  `json:"org,omitempty"`
	AS            string  `json:"as,omitempty"`
}

// Location is one row of the table: a CIDR and the place it resolves to
// (inlined in JSON and YAML).
type Location struct {
	CIDR string `json:"cidr"`
	Place
}

// Data is the --data file format: {"entries": [Location, ...]}.
type Data struct {
	Entries []Location `json:"entries"`
}

// Response is the ip-api-style body of GET /json/{ip}: the query, its
// status and, on success, the place (inlined).
type Response struct {
	Query   string `json:"query"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Place
}

type row struct {
	prefix netip.Prefix
	loc    Location
}

// Table answers longest-prefix lookups. It is immutable once built.
type Table struct {
	rows []row // sorted by prefix length, longest first
}

// NewTable validates entries and builds a table. Catch-all rows
// 0.0.0.0/0 and ::/0 (success, no location) are added unless entries
// define them.
func NewTable(entries []Location) (*Table, error) {
	t := &Table{}
	seen := map[netip.Prefix]bool{}
	for i, e := range entries {
		p, err := netip.ParsePrefix(strings.TrimSpace(e.CIDR))
		if err != nil {
			return nil, fmt.Errorf("entry %d: cidr %q: %w (use e.g. 127.0.1.0/24)", i, e.CIDR, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("entry %d: cidr %q has host bits set: use %s", i, e.CIDR, p.Masked())
		}
		if seen[p] {
			return nil, fmt.Errorf("entry %d: cidr %s appears twice", i, p)
		}
		if math.IsNaN(e.Lat) || e.Lat < -90 || e.Lat > 90 || math.IsNaN(e.Lon) || e.Lon < -180 || e.Lon > 180 {
			return nil, fmt.Errorf("entry %d (%s): lat must be in [-90, 90] and lon in [-180, 180]", i, p)
		}
		seen[p] = true
		e.CIDR = p.String()
		t.rows = append(t.rows, row{prefix: p, loc: e})
	}
	for _, catchAll := range []string{"0.0.0.0/0", "::/0"} {
		p := netip.MustParsePrefix(catchAll)
		if !seen[p] {
			t.rows = append(t.rows, row{prefix: p, loc: Location{CIDR: catchAll}})
		}
	}
	sort.SliceStable(t.rows, func(i, j int) bool { return t.rows[i].prefix.Bits() > t.rows[j].prefix.Bits() })
	return t, nil
}

// ParseIP parses the {ip} path segment: an IPv4 or IPv6 address without a
// zone; IPv4-mapped IPv6 addresses are unmapped.
func ParseIP(s string) (netip.Addr, bool) {
	if s == "" || len(s) > 64 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Lookup returns the ip-api response for query.
func (t *Table) Lookup(query string) Response {
	addr, ok := ParseIP(query)
	if !ok {
		return Response{Query: query, Status: "fail", Message: "invalid query"}
	}
	for _, r := range t.rows {
		if r.prefix.Contains(addr) {
			return Response{Query: query, Status: "success", Place: r.loc.Place}
		}
	}
	// Unreachable with the catch-all rows, kept for safety.
	return Response{Query: query, Status: "success"}
}

// LoadData reads a --data file (JSON or YAML) and builds its table.
func LoadData(path string) (*Table, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read geo data: %w", err)
	}
	var d Data
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		return nil, fmt.Errorf("geo data %s: %w (expected {\"entries\": [{\"cidr\": ..., \"region\": ..., \"city\": ..., \"lat\": ..., \"lon\": ...}]})", path, err)
	}
	if len(d.Entries) == 0 {
		return nil, fmt.Errorf("geo data %s has no entries", path)
	}
	t, err := NewTable(d.Entries)
	if err != nil {
		return nil, fmt.Errorf("geo data %s: %w", path, err)
	}
	return t, nil
}

// Handler serves GET /json/{ip}, GET /json/ (the caller's address, as
// ip-api does) and GET /healthz.
func Handler(t *Table) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /json/{ip}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, t.Lookup(r.PathValue("ip")))
	})
	caller := func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		writeJSON(w, t.Lookup(host))
	}
	mux.HandleFunc("GET /json/{$}", caller)
	mux.HandleFunc("GET /json", caller)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
