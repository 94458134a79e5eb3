package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
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
	testpoll.UntilSeen(t, 30*time.Second, "3 providers advertised", func() (bool, string) {
		var o api.Overview
		if resp, err := hc.Get(fed.DashboardURL + "/api/v1/overview"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&o)
			_ = resp.Body.Close()
		}
		return len(o.Advertisements) == 3, fmt.Sprintf("%d providers advertised", len(o.Advertisements))
	})
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
	testpoll.UntilReport(t, 10*time.Second, fmt.Sprintf("at most %d goroutines after Stop (%d before Start)", before+2, before), func() bool {
		return runtime.NumGoroutine() <= before+2
	}, func() string {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		return fmt.Sprintf("%d goroutines:\n%s", runtime.NumGoroutine(), buf[:n])
	})
}
