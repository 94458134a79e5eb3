package loadgencmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
	"github.com/federation-autoscaler/federation-autoscaler/server/loadgen"
)

// TestLoadgenAgainstTheRealBroker runs the load generator at a small size
// (100+100 agents)
// against the real broker binary it starts itself (with its dashboard and
// one websocket viewer) and checks that every figure is produced and that
// nothing failed.
func TestLoadgenAgainstTheRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the broker binary and runs for ~30 s")
	}
	// The build has its own deadline: on a loaded machine (make test
	// builds many packages at once) it alone took over 3 minutes, and it
	// says nothing about the generator.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancelBuild()
	bin, err := testbin.Build(buildCtx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "loadgen", "--start-broker", "--providers", "100", "--consumers", "100",
		"--warmup", "8s", "--duration", "15s", "--advertise-every", "5s", "--long-poll-wait", "3s",
		"--viewers", "1", "--output", "json",
		// A starved broker (make test runs many packages at once) must not
		// reset connections whose TLS handshake is merely slow: the agents'
		// redials would turn into a handshake storm and the run into errors
		// that say nothing about the generator.
		"--broker-arg=--handshake-timeout=1m")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, stderr.String())
	}
	var rep loadgen.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout.String())
	}
	t.Logf("report: %s", stdout.String())
	if rep.Errors != 0 {
		t.Errorf("%d errors, want 0: %+v", rep.Errors, rep.Routes)
	}
	if len(rep.Routes) != 4 {
		t.Fatalf("%d routes reported, want 4", len(rep.Routes))
	}
	for _, r := range rep.Routes {
		if r.Requests == 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
			t.Errorf("route %s: %d requests, p50 %.3f, p99 %.3f, max %.3f ms: want requests and ordered percentiles", r.Route, r.Requests, r.P50Ms, r.P99Ms, r.MaxMs)
		}
		if r.BrokerP99LeMs == 0 {
			t.Errorf("route %s: no broker-side p99 (the broker's /metrics histogram was not read)", r.Route)
		}
	}
	for name, v := range map[string]float64{
		"broker CPU per request": rep.BrokerCPUMsPerRequest, "broker RSS": rep.BrokerRSSMiBMax,
		"requests/s": rep.RequestsPerSecond, "generator CPU": rep.GeneratorCPUSeconds,
	} {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if rep.Certificates.Count != 200 || rep.LoadAverageEnd == "" {
		t.Errorf("certificates %+v, load average %q", rep.Certificates, rep.LoadAverageEnd)
	}
	if rep.ViewerMessages == 0 || rep.ViewerBytes < rep.ViewerMessages {
		t.Errorf("the dashboard viewer received %d live fragments, %d bytes, during the window: want some, each with bytes", rep.ViewerMessages, rep.ViewerBytes)
	}
}

func TestValidate(t *testing.T) {
	base := func() Options {
		o := Options{StartBroker: true, Instructions: "longpoll", Output: "markdown", BrokerLogLevel: "info"}
		o.Config.Providers, o.Config.Consumers = 1, 1
		o.Config.Warmup, o.Config.Window = time.Second, time.Second
		o.Config.AdvertiseEvery, o.Config.HeartbeatEvery, o.Config.NodeGroupsEvery = time.Second, time.Second, time.Second
		o.Config.PollEvery, o.Config.LongPollWait = time.Second, time.Second
		return o
	}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"valid", func(*Options) {}, ""},
		{"no agents", func(o *Options) { o.Config.Providers, o.Config.Consumers = 0, 0 }, "at least one agent"},
		{"mode", func(o *Options) { o.Instructions = "push" }, "want longpoll or poll"},
		{"output", func(o *Options) { o.Output = "yaml" }, "want markdown or json"},
		{"long wait", func(o *Options) { o.Config.LongPollWait = 2 * time.Minute }, "at most 60s"},
		{"no broker", func(o *Options) { o.StartBroker = false }, "--broker-url and --pki-dir"},
		{"both", func(o *Options) { o.Config.BrokerURL = "https://x:1" }, "drop --broker-url"},
		{"zero window", func(o *Options) { o.Config.Window = 0 }, "--duration must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// A port picked for the started broker that another process takes before
// the broker binds it costs a restart on new ports, not the run.
func TestStartBrokerOnNewPortsWhenOneWasTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the broker binary")
	}
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancelBuild()
	bin, err := testbin.Build(buildCtx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	o := Options{StartBroker: true, BrokerBinary: bin, BrokerLogLevel: "info", Instructions: "poll",
		pickPort: func() (string, error) {
			picks++
			if picks == 1 {
				return taken.Addr().String(), nil // taken before the broker binds it
			}
			return freePort()
		}}
	o.Config.Providers, o.Config.Consumers = 1, 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := startBroker(ctx, o, log)
	if err != nil {
		t.Fatalf("the broker did not start on new ports: %v", err)
	}
	defer b.stop(log, false)
	if picks != 4 || b.apiURL == "https://"+taken.Addr().String() {
		t.Errorf("%d ports picked, the broker at %s (the taken port is %s): want a second start on two new ports", picks, b.apiURL, taken.Addr())
	}
}
