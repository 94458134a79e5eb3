package democmd

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/cli"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
)

// syncBuffer is a bytes.Buffer safe for the command's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemoCommand runs `demo` on free ports, waits for the printed URLs and
// token, then stops it as Ctrl-C would (its context ends) and expects a
// clean return.
func TestDemoCommand(t *testing.T) {
	root := cli.NewRoot(NewCommand())
	out := &syncBuffer{}
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs([]string{"demo", "--base-port", "0", "--data-dir", t.TempDir(), "--providers", "2", "--peering-delay", "0s"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	testpoll.UntilReport(t, 60*time.Second, "the start-up banner (Ctrl-C stops)", func() bool {
		select {
		case err := <-done:
			t.Fatalf("demo returned early: %v\n%s", err, out)
		default:
		}
		return strings.Contains(out.String(), "Ctrl-C stops")
	}, func() string { return "output:\n" + out.String() })
	s := out.String()
	for _, want := range []string{"… starting provider 1/2: sydney", "… starting provider 2/2: montreal", "Broker dashboard   http://127.0.0.1:", "Consumer console   http://", "Console login token: "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		buf := make([]byte, 8<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("demo did not stop within 30 s of Ctrl-C:\n%s\n%s", out, buf[:n])
	}
}

func TestProvidersFlagValidated(t *testing.T) {
	root := cli.NewRoot(NewCommand())
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"demo", "--providers", "0", "--data-dir", t.TempDir()})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--providers 0") {
		t.Fatalf("err = %v, want a --providers error", err)
	}
}
