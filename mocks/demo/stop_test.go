package demo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// TestStopReturnsEveryComponent: after Stop, every goroutine the demo
// started has returned (Ctrl-C leaves nothing running).
func TestStopReturnsEveryComponent(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fed, err := demo.Start(ctx, demo.Options{DataDir: t.TempDir(), AdvertiseInterval: time.Second, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var o api.Overview
		if resp, err := hc.Get(fed.DashboardURL + "/api/v1/overview"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&o)
			_ = resp.Body.Close()
		}
		if len(o.Advertisements) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d providers advertised, want 3", len(o.Advertisements))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
	tr.CloseIdleConnections()
	running := runtime.NumGoroutine()
	start := time.Now()
	cancel()
	slow := time.AfterFunc(5*time.Second, func() {
		buf := make([]byte, 4<<20)
		n := runtime.Stack(buf, true)
		t.Errorf("Stop is still running after 5 s:\n%s", buf[:n])
	})
	if err := fed.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	slow.Stop()
	t.Logf("Stop returned in %s (%d goroutines while running)", time.Since(start).Round(time.Millisecond), running)
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left after Stop (%d before Start):\n%s", runtime.NumGoroutine(), before, buf[:n])
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}
