package signal

import (
	"context"
	"testing"
	"time"
)

func TestSignalCoalescesAndCloses(t *testing.T) {
	var s Signal
	ctx, cancel := context.WithCancel(context.Background())
	a, b := s.Subscribe(ctx), s.Subscribe(ctx)
	for range 5 {
		s.Notify() // never blocks, however many changes nobody read yet
	}
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		select {
		case <-ch:
		default:
			t.Fatalf("subscriber %s got no value after Notify", name)
		}
		select {
		case <-ch:
			t.Fatalf("subscriber %s got a second value: five changes must coalesce into one", name)
		default:
		}
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("a value after the context ended, want the channel closed")
			}
		case <-deadline:
			t.Fatal("the channel was not closed after the context ended")
		}
	}
	if n := s.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers left after their contexts ended", n)
	}
	s.Notify() // nobody listening: nothing to do
}
