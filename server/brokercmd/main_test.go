package brokercmd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/brokerproc"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testbin"
)

// binary is the federation-autoscaler binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fa-brokercmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = testbin.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// startBroker starts the broker on ephemeral loopback ports and waits until
// /readyz answers 200.
func startBroker(tb testing.TB, args ...string) *brokerproc.Process {
	tb.Helper()
	return brokerproc.Start(tb, binary, brokerproc.Options{}, args...)
}

// launchBroker starts the broker on ephemeral loopback ports and waits until
// it has logged both addresses (a standby replica is never ready).
func launchBroker(tb testing.TB, args ...string) *brokerproc.Process {
	tb.Helper()
	return brokerproc.Launch(tb, binary, brokerproc.Options{}, args...)
}

func run(tb testing.TB, env []string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
