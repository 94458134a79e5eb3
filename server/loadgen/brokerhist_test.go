package loadgen

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestBrokerP99FromTwoScrapes(t *testing.T) {
	scrape := func(counts ...float64) brokerHist {
		var b strings.Builder
		b.WriteString("# HELP fa_broker_http_request_duration_seconds x\n")
		for i, le := range []string{"0.001", "0.005", "0.05", "+Inf"} {
			b.WriteString(`fa_broker_http_request_duration_seconds_bucket{method="GET",route="/api/v1/nodegroups",le="` + le + `"} `)
			b.WriteString(strconvF(counts[i]) + "\n")
		}
		b.WriteString(`fa_broker_http_requests_total{method="GET",route="/api/v1/nodegroups",code="200"} 5` + "\n")
		h, err := parseBrokerHist(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	start := scrape(10, 10, 10, 10)
	for _, tc := range []struct {
		name  string
		end   brokerHist
		bound float64
		n     float64
	}{
		// 1 000 requests in the window: 995 within 1 ms.
		{"p99 in the first bucket", scrape(1005, 1010, 1010, 1010), 0.001, 1000},
		// 980 within 1 ms, 1 000 within 5 ms.
		{"p99 in the second bucket", scrape(990, 1010, 1010, 1010), 0.005, 1000},
		// 2 % above the last finite bound.
		{"p99 above the last bound", scrape(990, 990, 990, 1010), math.Inf(1), 1000},
		{"nothing in the window", scrape(10, 10, 10, 10), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, n := quantileBound(start, tc.end, "GET /api/v1/nodegroups", 0.99)
			if bound != tc.bound || n != tc.n {
				t.Errorf("p99 bound %v over %v requests, want %v over %v", bound, n, tc.bound, tc.n)
			}
		})
	}
	if _, n := quantileBound(start, start, "POST /api/v1/heartbeat", 0.99); n != 0 {
		t.Errorf("a route the broker never served has %v requests", n)
	}
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
