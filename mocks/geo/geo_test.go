package geo

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestJSONRoute(t *testing.T) {
	srv := httptest.NewServer(Handler(DefaultTable()))
	defer srv.Close()
	tests := []struct {
		ip, status, region, city string
	}{
		{"127.0.1.10", "success", "NSW", "Sydney"},
		{"127.0.2.1", "success", "QC", "Montreal"},
		{"127.0.3.1", "success", "IDF", "Paris"},
		{"127.0.4.1", "success", "ENG", "London"},
		{"127.0.5.1", "success", "13", "Tokyo"},
		{"127.0.6.1", "success", "HE", "Frankfurt am Main"},
		{"127.0.7.1", "success", "SP", "São Paulo"},
		{"127.0.8.1", "success", "MH", "Mumbai"},
		{"127.0.9.1", "success", "AB", "Calgary"},
		{"127.0.10.1", "success", "LOM", "Milan"},
		{"127.0.11.1", "success", "SG", "Singapore"},
		{"127.0.12.255", "success", "CA", "San Francisco"},
		{"172.23.4.1", "success", "QC", "Montreal"},
		{"172.23.4.70", "success", "CA", "San Francisco"},
		{"172.23.4.130", "success", "AB", "Calgary"},
		{"172.23.4.200", "success", "QC", "Montreal"},
		{"172.23.6.63", "success", "IDF", "Paris"},
		{"172.23.6.64", "success", "ENG", "London"},
		{"172.23.7.100", "success", "13", "Tokyo"},
		{"172.23.22.150", "success", "MH", "Mumbai"},
		{"::ffff:127.0.3.9", "success", "IDF", "Paris"},
		{"127.0.0.1", "success", "", ""},
		{"8.8.8.8", "success", "", ""},
		{"2001:db8::1", "success", "", ""},
		{"not-an-ip", "fail", "", ""},
		{"999.1.1.1", "fail", "", ""},
		{"fe80::1%25eth0", "fail", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			resp, body := get(t, srv, "/json/"+tt.ip)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			var r Response
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.status || r.Region != tt.region || r.City != tt.city {
				t.Fatalf("got %s", body)
			}
			if tt.status == "fail" && r.Message != "invalid query" {
				t.Errorf("fail message = %q", r.Message)
			}
			if tt.region == "" {
				// Only query and status on the wire (plus message on fail).
				var raw map[string]any
				_ = json.Unmarshal(body, &raw)
				for k := range raw {
					if k != "query" && k != "status" && k != "message" {
						t.Errorf("unexpected field %q in %s", k, body)
					}
				}
			} else if r.Lat == 0 || r.Lon == 0 || r.CountryCode == "" || r.ContinentCode == "" || r.AS == "" {
				t.Errorf("incomplete location %s", body)
			}
		})
	}
}

func TestCallerAndHealthz(t *testing.T) {
	srv := httptest.NewServer(Handler(DefaultTable()))
	defer srv.Close()
	for _, p := range []string{"/json/", "/json"} {
		resp, body := get(t, srv, p)
		var r Response
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || r.Query != "127.0.0.1" || r.Status != "success" {
			t.Fatalf("%s: %d %s %v", p, resp.StatusCode, body, err)
		}
	}
	resp, body := get(t, srv, "/healthz")
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	resp, _ = get(t, srv, "/nope")
	if resp.StatusCode != 404 {
		t.Fatalf("unknown route: %d", resp.StatusCode)
	}
	r, err := srv.Client().Post(srv.URL+"/json/1.2.3.4", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", r.StatusCode)
	}
}

func TestDefaultDataCoversAllRegions(t *testing.T) {
	loop := map[string]bool{}
	lab := map[string]bool{}
	for _, e := range DefaultEntries() {
		if strings.HasPrefix(e.CIDR, "127.") {
			loop[e.Region] = true
		} else {
			lab[e.Region] = true
		}
	}
	if len(loop) != 12 || len(lab) != 12 {
		t.Fatalf("loopback regions %d, lab regions %d, want 12 each", len(loop), len(lab))
	}
	for _, reg := range []string{"QC", "CA", "NSW", "IDF", "ENG", "13", "HE", "SP", "MH", "AB", "LOM", "SG"} {
		addr, ok := LoopbackAddress(reg, 7)
		if !ok {
			t.Fatalf("no loopback address for %s", reg)
		}
		if got := DefaultTable().Lookup(addr); got.Region != reg {
			t.Errorf("LoopbackAddress(%s) = %s resolves to %q", reg, addr, got.Region)
		}
	}
	if _, ok := LoopbackAddress("XX", 1); ok {
		t.Error("loopback address for an unknown region")
	}
}

func TestLongestPrefix(t *testing.T) {
	tab, err := NewTable([]Location{
		{CIDR: "10.0.0.0/8", Place: Place{Region: "A"}},
		{CIDR: "10.1.0.0/16", Place: Place{Region: "B"}},
		{CIDR: "10.1.2.0/24", Place: Place{Region: "C"}},
		{CIDR: "10.1.2.3/32", Place: Place{Region: "D"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{"10.9.9.9": "A", "10.1.9.9": "B", "10.1.2.9": "C", "10.1.2.3": "D", "11.0.0.1": ""} {
		if got := tab.Lookup(ip).Region; got != want {
			t.Errorf("%s → %q, want %q", ip, got, want)
		}
	}
}

func TestLoadData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yml := write("g.yaml", "entries:\n- cidr: 10.0.0.0/8\n  region: X\n  city: Xville\n  lat: 1.5\n  lon: 2.5\n")
	tab, err := LoadData(yml)
	if err != nil {
		t.Fatal(err)
	}
	if r := tab.Lookup("10.2.3.4"); r.City != "Xville" || r.Lat != 1.5 {
		t.Fatalf("%+v", r)
	}
	if r := tab.Lookup("127.0.1.1"); r.Region != "" {
		t.Fatalf("--data must replace the built-in table, got %+v", r)
	}
	js := write("g.json", `{"entries":[{"cidr":"0.0.0.0/0","region":"WORLD"}]}`)
	if tab, err := LoadData(js); err != nil || tab.Lookup("1.1.1.1").Region != "WORLD" {
		t.Fatalf("json: %v", err)
	}
	for name, content := range map[string]string{
		"empty":     "entries: []\n",
		"badcidr":   "entries:\n- cidr: 10.0.0.0/33\n",
		"hostbits":  "entries:\n- cidr: 10.0.0.1/8\n",
		"dup":       "entries:\n- cidr: 10.0.0.0/8\n- cidr: 10.0.0.0/8\n",
		"badlat":    "entries:\n- cidr: 10.0.0.0/8\n  lat: 91\n",
		"unknown":   "entries:\n- cidr: 10.0.0.0/8\n  town: x\n",
		"notyaml":   "{{{",
		"wrongtype": "entries: 3\n",
	} {
		if _, err := LoadData(write(name, content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadData(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzParseIP(f *testing.F) {
	for _, s := range []string{"127.0.1.1", "::1", "::ffff:1.2.3.4", "fe80::1%eth0", "1.2.3", "", "01.2.3.4", "[::1]"} {
		f.Add(s)
	}
	tab := DefaultTable()
	f.Fuzz(func(t *testing.T, s string) {
		addr, ok := ParseIP(s)
		r := tab.Lookup(s)
		if ok != (r.Status == "success") {
			t.Fatalf("ParseIP ok=%v but status %q", ok, r.Status)
		}
		if ok && (addr.Is4In6() || addr.Zone() != "") {
			t.Fatalf("ParseIP(%q) = %v", s, addr)
		}
		if r.Query != s {
			t.Fatalf("query %q != %q", r.Query, s)
		}
	})
}

func BenchmarkLookup(b *testing.B) {
	tab := DefaultTable()
	ips := []string{"127.0.3.9", "172.23.22.130", "8.8.8.8", "bad"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tab.Lookup(ips[i%len(ips)])
	}
}
