package brokercmd_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/rest/resttest"
)

func TestHelp(t *testing.T) {
	out, err := run(t, nil, "broker", "--help")
	if err != nil {
		t.Fatalf("broker --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"--pki-dir", "--data-dir", "--listen", "--dashboard-listen", "--allow-legacy-certs",
		"--reservation-lease", "--provider-stale-after", "--rate-limit-burst", "--rate-limit-rps", "--chunk-config", "--dashboard-token",
		"--max-conns", "--max-conns-per-ip", "--handshake-timeout", "--reset-damaged-store",
		"--store", "--kubeconfig", "--namespace", "--kube-api-qps", "--kube-api-burst", "--disconnect-grace",
		"--reevaluate-interval", "--reevaluate-cost-threshold", "--reevaluate-carbon-threshold", "--reevaluate-rtt-threshold",
		"--migration-budget", "--migration-window", "--migration-timeout"} {
		if !strings.Contains(out, flag) {
			t.Errorf("--help does not document %s", flag)
		}
	}
	if !strings.Contains(out, "--rate-limit-release-burst") {
		t.Error("--help does not document --rate-limit-release-burst")
	}
}

func TestBadFlags(t *testing.T) {
	pkiDir := resttest.NewPKI(t).Dir
	empty := t.TempDir()
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"broker", "--bogus"}, "unknown flag: --bogus"},
		{"no pki dir", nil, []string{"broker", "--data-dir", empty}, "--pki-dir is required"},
		{"pki dir without files", nil, []string{"broker", "--pki-dir", empty, "--data-dir", empty}, "federation-autoscaler pki init --dir " + empty},
		{"no data dir", nil, []string{"broker", "--pki-dir", pkiDir}, "--data-dir is required"},
		{"unknown store", nil, []string{"broker", "--pki-dir", pkiDir, "--store", "sqlite"}, `--store "sqlite": want bolt or kubernetes`},
		{"zero kube qps", nil, []string{"broker", "--pki-dir", pkiDir, "--store", "kubernetes", "--kube-api-qps", "0"}, "--kube-api-qps must be > 0"},
		{"kube store without a cluster", []string{"KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}, []string{"broker", "--pki-dir", pkiDir, "--store", "kubernetes", "--kubeconfig", filepath.Join(empty, "missing")}, "--kubeconfig"},
		{"bad listen", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--listen", "8443"}, `--listen "8443"`},
		{"bad duration", nil, []string{"broker", "--reservation-lease", "soon"}, "--reservation-lease"},
		{"short token", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--dashboard-token", "short"}, "--dashboard-token is 5 characters"},
		{"zero rps", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--rate-limit-rps", "0"}, "--rate-limit-rps must be > 0"},
		{"negative release burst", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--rate-limit-release-burst", "-1"}, "--rate-limit-release-burst must be >= 0"},
		{"negative chunk watts", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--chunk-watts-gpu", "-1"}, "--chunk-watts-gpu must be between 0 and 100000 watts"},
		{"short history window", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--history-window", "1m"}, "--history-window must be between 5m0s and 168h0m0s"},
		{"negative disconnect grace", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--disconnect-grace", "-1s"}, "--disconnect-grace must be between 0 (no grace) and 24h0m0s, got -1s"},
		{"disconnect grace over a day", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--disconnect-grace", "25h"}, "--disconnect-grace must be between 0 (no grace) and 24h0m0s, got 25h0m0s"},
		{"negative migration budget", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--migration-budget", "-1"}, "--migration-budget must be between 0 (no migration) and 1000, got -1"},
		{"migration window over a week", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--migration-window", "169h"}, "--migration-window must be between 1s and 168h0m0s (0: the default 1h0m0s), got 169h0m0s"},
		{"migration timeout under a second", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--migration-timeout", "10ms"}, "--migration-timeout must be between 1s and 24h (0: the default 10m0s), got 10ms"},
		{"negative cost threshold", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--reevaluate-cost-threshold", "-0.5"}, "--reevaluate-cost-threshold must be a finite number from 0 to 1000000, got -0.5"},
		{"short reevaluate interval", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--reevaluate-interval", "10ms"}, "--reevaluate-interval must be at least 1s"},
		{"bad chunk config", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--chunk-config", filepath.Join(empty, "missing.yaml")}, "--chunk-config"},
		{"env fallback", []string{"FA_PKI_DIR=" + empty}, []string{"broker", "--data-dir", empty}, "run `federation-autoscaler pki init --dir " + empty},
		{"env bad value", []string{"FA_RATE_LIMIT_BURST=many"}, []string{"broker"}, "FA_RATE_LIMIT_BURST"},
		{"negative max conns", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--max-conns", "-1"}, "--max-conns must be >= 0"},
		{"per-ip above total", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--max-conns", "10", "--max-conns-per-ip", "20"}, "--max-conns-per-ip 20 is above the per-listener cap of 10"},
		{"max conns beyond the fd limit", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--max-conns", "100000000"}, "(ulimit -n)"},
		{"handshake timeout too long", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--handshake-timeout", "1h"}, "--handshake-timeout must be between 0"},
		{"listener failure", nil, []string{"broker", "--pki-dir", pkiDir, "--data-dir", empty, "--listen", "256.0.0.1:1"}, "--listen 256.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.env, tc.args...)
			if err == nil {
				t.Fatalf("succeeded:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestServeAndGracefulStop runs the binary with flags from the environment,
// talks to both listeners and stops it with SIGTERM.
func TestServeAndGracefulStop(t *testing.T) {
	p := resttest.NewPKI(t)
	data := t.TempDir()
	t.Setenv("FA_DASHBOARD_TOKEN", "0123456789abcdef-token")
	proc := startBroker(t, "--pki-dir", p.Dir, "--data-dir", data)
	c := p.NewClient(t, "https://"+proc.APIAddr, "prov-a", api.RoleProvider, 2)
	if r := c.Must(t, "GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("API healthz: %d %s", r.Status, r.Body)
	}
	resp, err := http.Get("http://" + proc.DashAddr + "/api/v1/overview")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("overview without the token from FA_DASHBOARD_TOKEN: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + proc.DashAddr + "/api/v1/overview?token=0123456789abcdef-token")
	if err != nil {
		t.Fatal(err)
	}
	var ov api.Overview
	err = json.NewDecoder(resp.Body).Decode(&ov)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("overview: %d %v", resp.StatusCode, err)
	}
	// The web dashboard is mounted: without a session it offers its login.
	resp, err = http.Get("http://" + proc.DashAddr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("dashboard login page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, err = http.Get("http://" + proc.DashAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("metrics: %d", resp.StatusCode)
	}
	if err := proc.Stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "broker.db")); err != nil {
		t.Errorf("no database in the data dir: %v", err)
	}
}

// TestPprofIsOptIn: /debug/pprof/ is served only with --pprof, and then
// only with the dashboard token.
func TestPprofIsOptIn(t *testing.T) {
	p := resttest.NewPKI(t)
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	off := startBroker(t, "--pki-dir", p.Dir, "--data-dir", t.TempDir())
	if got := get("http://" + off.DashAddr + "/debug/pprof/"); got != http.StatusNotFound {
		t.Errorf("without --pprof: /debug/pprof/ answered %d, want 404", got)
	}
	off.Kill(t)
	on := startBroker(t, "--pki-dir", p.Dir, "--data-dir", t.TempDir(), "--pprof", "--dashboard-token", "0123456789abcdef-token")
	defer on.Kill(t)
	if got := get("http://" + on.DashAddr + "/debug/pprof/"); got != http.StatusUnauthorized {
		t.Errorf("--pprof without the token: %d, want 401", got)
	}
	if got := get("http://" + on.DashAddr + "/debug/pprof/goroutine?debug=1&token=0123456789abcdef-token"); got != http.StatusOK {
		t.Errorf("--pprof with the token: %d, want 200", got)
	}
}
