package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	q, n := h.quantiles(0.5, 0.99, 1)
	if n != 1000 {
		t.Fatalf("n = %d", n)
	}
	for i, tc := range []struct{ want time.Duration }{{500 * time.Millisecond}, {990 * time.Millisecond}, {time.Second}} {
		lo, hi := tc.want, time.Duration(float64(tc.want)*1.045)
		if q[i] < lo || q[i] > hi {
			t.Errorf("quantile %d = %v, want within [%v, %v]", i, q[i], lo, hi)
		}
	}
	var empty histogram
	if q, n := empty.quantiles(0.5); n != 0 || q[0] != 0 {
		t.Errorf("empty histogram: %v %d", q, n)
	}
}

func TestProcReadsThisProcess(t *testing.T) {
	cpu, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 0 {
		t.Fatalf("CPU %v", cpu)
	}
	rss, ok := procRSS(os.Getpid())
	if !ok || rss < 1<<20 {
		t.Fatalf("RSS %d (%v), want at least 1 MiB", rss, ok)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Fatal("a missing process must be an error")
	}
	if loadAverage() == "" {
		t.Fatal("no load average")
	}
}

func TestTransportErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("post: %w", syscall.ECONNRESET), "reset"},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "reset"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "eof"},
		{errors.New("tls: bad certificate"), "transport"},
	} {
		if got := transportError(tc.err); got != tc.want {
			t.Errorf("transportError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
