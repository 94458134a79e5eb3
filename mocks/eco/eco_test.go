package eco

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string, []byte) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func TestRoutes(t *testing.T) {
	at := time.Date(2026, 7, 22, 22, 15, 0, 0, time.UTC) // UTC hour 22
	p := DefaultProfiles()
	srv := httptest.NewServer(Handler(p, Options{Now: func() time.Time { return at }}))
	defer srv.Close()
	nsw, _ := p.Profile("NSW")

	code, ct, body := get(t, srv, "/carbon?region=NSW")
	var c CarbonResponse
	if err := json.Unmarshal(body, &c); err != nil || code != 200 || ct != "application/json" {
		t.Fatalf("carbon: %d %s %s %v", code, ct, body, err)
	}
	if c.Region != "NSW" || c.CarbonIntensity != nsw[22] {
		t.Fatalf("carbon = %+v, want NSW %v", c, nsw[22])
	}

	code, _, body = get(t, srv, "/carbon/forecast?region=NSW")
	var f ForecastResponse
	if err := json.Unmarshal(body, &f); err != nil || code != 200 {
		t.Fatalf("forecast: %d %s %v", code, body, err)
	}
	if len(f.Forecast) != 24 || f.Forecast[0] != nsw[22] || f.Forecast[1] != nsw[23] || f.Forecast[2] != nsw[0] || f.Forecast[23] != nsw[21] {
		t.Fatalf("forecast does not start at hour 22 and wrap: %v vs %v", f.Forecast, nsw)
	}

	errs := []struct {
		path, want string
		code       int
	}{
		{"/carbon", `{"error":"missing 'region' query parameter"}`, 400},
		{"/carbon?region=", `{"error":"missing 'region' query parameter"}`, 400},
		{"/carbon/forecast", `{"error":"missing 'region' query parameter"}`, 400},
		{"/carbon?region=XX", `{"error":"unknown region: XX"}`, 404},
		{"/carbon/forecast?region=qc", `{"error":"unknown region: qc"}`, 404},
	}
	for _, e := range errs {
		code, ct, body := get(t, srv, e.path)
		if code != e.code || ct != "application/json" || strings.TrimSpace(string(body)) != e.want {
			t.Errorf("%s: %d %s %s, want %d %s", e.path, code, ct, body, e.code, e.want)
		}
	}
	code, _, body = get(t, srv, "/healthz")
	if code != 200 || len(body) != 0 {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, _, _ := get(t, srv, "/nope"); code != 404 {
		t.Errorf("unknown route: %d", code)
	}
}

func TestClockSelectsHour(t *testing.T) {
	p := DefaultProfiles()
	qc, _ := p.Profile("HE")
	for _, h := range []int{0, 5, 11, 18, 23} {
		at := time.Date(2026, 1, 1, h, 59, 0, 0, time.FixedZone("X", 3*3600)).UTC()
		srv := httptest.NewServer(Handler(p, Options{Now: func() time.Time { return at }}))
		_, _, body := get(t, srv, "/carbon?region=HE")
		srv.Close()
		var c CarbonResponse
		_ = json.Unmarshal(body, &c)
		if c.CarbonIntensity != qc[at.Hour()] {
			t.Errorf("hour %d: %v, want %v", at.Hour(), c.CarbonIntensity, qc[at.Hour()])
		}
	}
}

func TestIntegers(t *testing.T) {
	p, err := NewProfiles(map[string][]float64{"R": {1.4, 1.6, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(Handler(p, Options{Now: func() time.Time { return at }, Integers: true}))
	defer srv.Close()
	_, _, body := get(t, srv, "/carbon/forecast?region=R")
	if !strings.HasPrefix(string(body), `{"region":"R","forecast":[1,2,2,3`) {
		t.Fatalf("integers: %s", body)
	}
	plain := httptest.NewServer(Handler(p, Options{Now: func() time.Time { return at }}))
	defer plain.Close()
	_, _, body = get(t, plain, "/carbon?region=R")
	if strings.TrimSpace(string(body)) != `{"region":"R","carbonIntensity":1.4}` {
		t.Fatalf("decimal: %s", body)
	}
}

// TestDefaultProfilesRealistic pins the shape of the built-in data: clean
// grids in the tens, coal grids 600–800, daily variation everywhere.
func TestDefaultProfilesRealistic(t *testing.T) {
	p := DefaultProfiles()
	if got := strings.Join(p.Regions(), ","); got != "13,AB,CA,ENG,HE,IDF,LOM,MH,NSW,QC,SG,SP" {
		t.Fatalf("regions = %s", got)
	}
	ranges := map[string][2]float64{
		"QC": {20, 40}, "IDF": {30, 70}, "SP": {50, 120}, "ENG": {140, 260},
		"NSW": {640, 790}, "MH": {640, 760},
	}
	for _, r := range p.Regions() {
		prof, _ := p.Profile(r)
		lo, hi := prof[0], prof[0]
		for _, v := range prof {
			lo, hi = min(lo, v), max(hi, v)
		}
		if hi == lo {
			t.Errorf("%s does not vary with the hour", r)
		}
		if want, ok := ranges[r]; ok && (lo < want[0] || hi > want[1]) {
			t.Errorf("%s range [%v, %v], want within %v", r, lo, hi, want)
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
	day := "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24.5]"
	p, err := LoadData(write("e.yaml", "regions:\n  X: "+day+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if prof, ok := p.Profile("X"); !ok || prof[23] != 24.5 {
		t.Fatal("yaml profile not loaded")
	}
	if _, ok := p.Profile("QC"); ok {
		t.Fatal("--data must replace the built-in profiles")
	}
	if _, err := LoadData(write("e.json", `{"regions":{"X":`+day+`}}`)); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"short":    "regions:\n  X: [1,2,3]\n",
		"negative": "regions:\n  X: [-1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24]\n",
		"none":     "regions: {}\n",
		"unknown":  "regions:\n  X: " + day + "\nextra: 1\n",
		"garbage":  "[[[",
		"strings":  "regions:\n  X: [a]\n",
	} {
		if _, err := LoadData(write(name, content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
