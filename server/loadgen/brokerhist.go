package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// durationMetric is the broker's request-latency histogram
// (rest.MetricDuration), served on /metrics of its dashboard listener.
const durationMetric = "fa_broker_http_request_duration_seconds"

// brokerHist is one scrape of durationMetric: per route ("METHOD /path",
// as the generator names them) the cumulative count at each upper bound.
type brokerHist map[string]map[float64]float64

// scrapeBrokerHist reads the broker's latency histogram from metricsURL.
func scrapeBrokerHist(ctx context.Context, metricsURL string) (brokerHist, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping the broker's metrics at %s: %w", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping the broker's metrics at %s: %s", metricsURL, resp.Status)
	}
	return parseBrokerHist(resp.Body)
}

// parseBrokerHist reads the _bucket series of durationMetric from the
// Prometheus text format.
func parseBrokerHist(r io.Reader) (brokerHist, error) {
	h := brokerHist{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	prefix := durationMetric + "_bucket{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("broker metrics: malformed line %q", line)
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len(prefix):end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		le, err := strconv.ParseFloat(labels["le"], 64)
		if err != nil {
			return nil, fmt.Errorf("broker metrics: bucket bound %q: %w", labels["le"], err)
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("broker metrics: count in %q: %w", line, err)
		}
		route := labels["method"] + " " + labels["route"]
		if h[route] == nil {
			h[route] = map[float64]float64{}
		}
		h[route][le] = n
	}
	return h, sc.Err()
}

// quantileBound is the upper bound of the histogram bucket that holds
// quantile q of the requests counted between scrapes a and b of route, and
// how many there were; +Inf when q falls in the last bucket.
func quantileBound(a, b brokerHist, route string, q float64) (bound float64, n float64) {
	cur := b[route]
	total := cur[math.Inf(1)] - a[route][math.Inf(1)]
	if total <= 0 {
		return 0, 0
	}
	bounds := make([]float64, 0, len(cur))
	for le := range cur {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	for _, le := range bounds {
		if cur[le]-a[route][le] >= q*total {
			return le, total
		}
	}
	return math.Inf(1), total
}
