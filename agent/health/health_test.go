package health

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestReadiness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	tr := NewTracker(clk, 30*time.Second)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Reports.WithLabelValues("ok").Inc()
	h := Handler(tr, reg)
	get := func(path string) (int, Report, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var r Report
		_ = json.Unmarshal(rec.Body.Bytes(), &r)
		return rec.Code, r, rec.Body.String()
	}
	if code, r, _ := get("/readyz"); code != 503 || r.Ready {
		t.Fatalf("before contact: %d %+v", code, r)
	}
	tr.BrokerReached()
	tr.SetInput("geo", errors.New("mock-geo unreachable"))
	if code, r, _ := get("/readyz"); code != 200 || r.Inputs["geo"] != "mock-geo unreachable" {
		t.Fatalf("after contact: %d %+v", code, r)
	}
	clk.SetTime(clk.Now().Add(31 * time.Second))
	if code, _, _ := get("/readyz"); code != 503 {
		t.Fatalf("stale: %d", code)
	}
	tr.HandlerStarted("peer-r1")
	if code, r, _ := get("/readyz"); code != 200 || len(r.RunningHandlers) != 1 {
		t.Fatalf("handler running: %d %+v", code, r)
	}
	clk.SetTime(clk.Now().Add(16 * time.Minute))
	if code, _, _ := get("/readyz"); code != 503 {
		t.Fatalf("handler beyond grace: %d", code)
	}
	tr.HandlerFinished("peer-r1")
	if code, _, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _, body := get("/metrics"); code != 200 || !strings.Contains(body, `fa_agent_reports_total{outcome="ok"} 1`) {
		t.Fatalf("metrics %d %s", code, body)
	}
}
