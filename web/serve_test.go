package web

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestServeStopsRightAfterStart: a stop that races the start (Shutdown
// before the listener serves) must still end Serve and free the port. The
// demo's quick Ctrl-C hung on this.
func TestServeStopsRightAfterStart(t *testing.T) {
	for i := range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, NewApp(), ln) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("run %d: Serve did not return after its context ended", i)
		}
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Fatalf("run %d: the listener still accepts connections after Serve returned", i)
		}
	}
}
