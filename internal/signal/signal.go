// Package signal is a coalescing change signal with many subscribers: a
// producer calls Notify after a change; every subscriber's channel (buffer
// 1) then holds one value however many changes came before it read. The
// broker's reservation service and the consumer agent publish their changes
// through it (the web pages' live publishers subscribe).
package signal

import (
	"context"
	"sync"
)

// Signal is safe for concurrent use; the zero value is ready.
type Signal struct {
	mu   sync.Mutex
	subs map[uint64]chan struct{}
	seq  uint64
}

// Subscribe returns a channel that receives a value (coalesced, buffer 1)
// after every Notify, until ctx ends; then it is closed.
func (s *Signal) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[uint64]chan struct{}{}
	}
	s.seq++
	id := s.seq
	s.subs[id] = ch
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.subs, id)
		close(ch)
		s.mu.Unlock()
	}()
	return ch
}

// Notify signals every subscriber without blocking.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Subscribers is the number of live subscriptions.
func (s *Signal) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}
