package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// RouteStats is one route's figures over the window.
type RouteStats struct {
	Route string `json:"route"`
	// Requests answered 2xx in the window, and their latency.
	Requests int64   `json:"requests"`
	P50Ms    float64 `json:"p50Ms"`
	P90Ms    float64 `json:"p90Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	// BrokerP99LeMs bounds the route's p99 as the broker itself measured
	// it (its request-duration histogram, from the handler chain's start to
	// the response handed to the connection): the upper bound of the
	// bucket holding the 99th percentile; -1 above the last bound, 0 when
	// not read (no MetricsURL). The gap to P99Ms is the time outside the
	// broker's handlers: both processes' scheduling and garbage collection
	// on a shared machine, TLS and the network.
	BrokerP99LeMs float64 `json:"brokerP99LeMs,omitempty"`
	// Errors by HTTP status, or for a request without an answer "timeout",
	// "reset" (refused or reset connection), "eof" (closed mid-request) or
	// "transport" (anything else).
	ErrorCount int64            `json:"errorCount"`
	Errors     map[string]int64 `json:"errors"`
	Note       string           `json:"note,omitempty"`
}

// Report is one run's result.
type Report struct {
	Providers     int     `json:"providers"`
	Consumers     int     `json:"consumers"`
	Instructions  string  `json:"instructions"`
	WarmupSeconds float64 `json:"warmupSeconds"`
	WindowSeconds float64 `json:"windowSeconds"`
	Certificates  Issued  `json:"certificates"`
	Viewers       int     `json:"viewers"`
	// ViewerMessages is how many live fragments the viewers received in
	// the window (all viewers together).
	ViewerMessages int64 `json:"viewerMessages"`
	// ViewerBytes is how many bytes of fragments they received in it.
	ViewerBytes int64        `json:"viewerBytes"`
	Routes      []RouteStats `json:"routes"`
	Requests    int64        `json:"requests"`
	Errors      int64        `json:"errors"`
	// RequestsPerSecond counts successful requests in the window.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	// Broker figures from /proc/<pid> (zero without a pid).
	BrokerCPUSeconds      float64 `json:"brokerCpuSeconds"`
	BrokerCores           float64 `json:"brokerCores"`
	BrokerCPUMsPerRequest float64 `json:"brokerCpuMsPerRequest"`
	BrokerRSSMiBMax       float64 `json:"brokerRssMiBMax"`
	BrokerRSSMiBMean      float64 `json:"brokerRssMiBMean"`
	// The generator's own cost and how late its scheduled requests
	// started: a lag near the cadences or cores near the machine's say the
	// generator, not the broker, is the limit.
	GeneratorCPUSeconds float64 `json:"generatorCpuSeconds"`
	GeneratorCores      float64 `json:"generatorCores"`
	ScheduleLagP99Ms    float64 `json:"scheduleLagP99Ms"`
	ScheduleLagMaxMs    float64 `json:"scheduleLagMaxMs"`
	LoadAverageStart    string  `json:"loadAverageStart"`
	LoadAverageEnd      string  `json:"loadAverageEnd"`
}

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### Load: %d providers + %d consumers, instructions by %s, %.0f s window after %.0f s warm-up\n\n",
		r.Providers, r.Consumers, r.Instructions, r.WindowSeconds, r.WarmupSeconds)
	fmt.Fprintf(&b, "| route | requests | p50 ms | p90 ms | p99 ms | max ms | broker-side p99 | errors |\n|---|---|---|---|---|---|---|---|\n")
	for _, rt := range r.Routes {
		name := rt.Route
		if rt.Note != "" {
			name += " (" + rt.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", name, rt.Requests, rt.P50Ms, rt.P90Ms, rt.P99Ms, rt.MaxMs, brokerP99(rt), errorList(rt))
	}
	fmt.Fprintf(&b, "\n| figure | value |\n|---|---|\n")
	rows := [][2]string{
		{"requests/s (2xx)", fmt.Sprintf("%.1f", r.RequestsPerSecond)},
		{"errors", fmt.Sprint(r.Errors)},
		{"broker CPU per request", fmt.Sprintf("%.3f ms", r.BrokerCPUMsPerRequest)},
		{"broker CPU", fmt.Sprintf("%.2f s (%.3f cores)", r.BrokerCPUSeconds, r.BrokerCores)},
		{"broker RSS", fmt.Sprintf("max %.1f MiB, mean %.1f MiB", r.BrokerRSSMiBMax, r.BrokerRSSMiBMean)},
		{"dashboard viewers", fmt.Sprintf("%d (%d fragments received, %d bytes)", r.Viewers, r.ViewerMessages, r.ViewerBytes)},
		{"generator CPU", fmt.Sprintf("%.2f s (%.3f cores)", r.GeneratorCPUSeconds, r.GeneratorCores)},
		{"generator schedule lag", fmt.Sprintf("p99 %.1f ms, max %.1f ms", r.ScheduleLagP99Ms, r.ScheduleLagMaxMs)},
		{"certificates issued", fmt.Sprintf("%d in %.2f s", r.Certificates.Count, r.Certificates.Seconds)},
		{"load average (start → end)", r.LoadAverageStart + " → " + r.LoadAverageEnd},
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// brokerP99 shows the broker-side p99 bound.
func brokerP99(rt RouteStats) string {
	switch {
	case rt.BrokerP99LeMs == 0:
		return "—"
	case rt.BrokerP99LeMs < 0:
		return "> 60 s"
	default:
		return fmt.Sprintf("≤ %g ms", rt.BrokerP99LeMs)
	}
}

func errorList(rt RouteStats) string {
	if rt.ErrorCount == 0 {
		return "0"
	}
	keys := make([]string, 0, len(rt.Errors))
	for k := range rt.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, rt.Errors[k]))
	}
	return strings.Join(parts, ", ")
}
