// Package live pushes re-rendered HTML fragments to browsers over
// websockets. A Hub owns its clients in one goroutine and fans every
// broadcast out to bounded per-client buffers; a client whose buffer is full
// is too slow and is dropped (its socket is closed, the browser reconnects
// and receives the latest fragment at once). A publication may carry only
// what changed since the one before (Message.Delta): a client that has not
// had every publication since it joined gets the whole fragment instead.
// ServeWS bridges Fiber (fasthttp) to github.com/coder/websocket by
// hijacking the connection.
package live

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
)

// DefaultClientBuffer is the number of pending messages a client may have
// before it counts as slow and is dropped.
const DefaultClientBuffer = 8

// Client is one registered websocket consumer of a Hub. Messages are read from
// Send; Done is closed when the hub dropped the client (slow, DropAll or hub
// stopped). A client is registered with Hub.Register and must be released
// with Hub.Unregister when its connection ends.
type Client struct {
	send chan []byte
	done chan struct{}
	// closed and current are touched only by the hub goroutine. current:
	// the client was sent a whole fragment and every publication since, so
	// a delta brings it up to date.
	closed, current bool
}

// Message is one publication. Full is the whole fragment, in pieces that
// are concatenated only when a client needs them (one that joins, or one
// that has not been sent a whole fragment yet); Delta is what changed
// since the publisher's previous publication, sent to every other client
// (empty: nothing for them). A publication the hub discarded for lack of
// clients leaves no client current, so no client is sent a delta that
// skips it. The slices must not be modified afterwards.
type Message struct {
	Delta []byte
	Full  [][]byte
}

// Send delivers the messages to write to the browser, oldest first.
func (c *Client) Send() <-chan []byte { return c.send }

// Done is closed once the hub no longer delivers to this client.
func (c *Client) Done() <-chan struct{} { return c.done }

// Hub fans broadcast messages out to its clients. The zero value is not
// usable: build one with NewHub and start Run.
type Hub struct {
	log        *slog.Logger
	bufSize    int
	register   chan *Client
	unregister chan *Client
	broadcast  chan Message
	dropAll    chan struct{}
	stopped    chan struct{}
	// wanted signals (buffer 1) that a client joined a hub without a
	// current fragment: the publisher should publish.
	wanted  chan struct{}
	clients atomic.Int64
	dropped atomic.Int64
}

// NewHub returns a hub whose clients buffer bufSize messages (≤0 means
// DefaultClientBuffer). log may be nil.
func NewHub(log *slog.Logger, bufSize int) *Hub {
	if bufSize <= 0 {
		bufSize = DefaultClientBuffer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		log:        log,
		bufSize:    bufSize,
		register:   make(chan *Client),
		unregister: make(chan *Client),
		broadcast:  make(chan Message),
		dropAll:    make(chan struct{}),
		stopped:    make(chan struct{}),
		wanted:     make(chan struct{}, 1),
	}
}

// ErrHubStopped is returned by Register once Run has returned.
var ErrHubStopped = errors.New("live hub is stopped")

// Run owns the client set until ctx is done; then every client is dropped.
// Run must be called exactly once.
//
// The last publication's whole fragment is kept only while at least one
// client is connected: a publisher that stops publishing when nobody
// watches (see Wanted) would otherwise hand a stale fragment to the next
// client. A publication that finds no client is discarded for the same
// reason.
func (h *Hub) Run(ctx context.Context) {
	defer close(h.stopped)
	st := &hubState{h: h, clients: make(map[*Client]struct{})}
	for {
		select {
		case <-ctx.Done():
			st.dropAll()
			return
		case c := <-h.register:
			st.join(c)
		case c := <-h.unregister:
			st.drop(c)
		case <-h.dropAll:
			st.dropAll()
		case msg := <-h.broadcast:
			st.publish(msg)
		}
	}
}

// hubState is what Run's goroutine owns.
type hubState struct {
	h       *Hub
	clients map[*Client]struct{}
	last    [][]byte // the last publication's whole fragment, in parts
}

func (st *hubState) drop(c *Client) {
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	delete(st.clients, c)
	st.h.clients.Store(int64(len(st.clients)))
	if len(st.clients) == 0 {
		st.last = nil
	}
}

func (st *hubState) dropAll() {
	for c := range st.clients {
		st.drop(c)
	}
}

// join adds c and sends it the whole fragment, or asks the publisher for
// one when there is none.
func (st *hubState) join(c *Client) {
	st.clients[c] = struct{}{}
	st.h.clients.Store(int64(len(st.clients)))
	if st.last != nil {
		c.send <- bytes.Join(st.last, nil) // fresh buffer: never blocks
		c.current = true
		return
	}
	select {
	case st.h.wanted <- struct{}{}:
	default:
	}
}

// publish sends msg's delta to the current clients and the whole fragment
// to the others; a client whose buffer is full is dropped.
func (st *hubState) publish(msg Message) {
	if len(st.clients) == 0 {
		return
	}
	st.last = msg.Full
	var full []byte // joined once, for the clients that need it
	for c := range st.clients {
		out := msg.Delta
		if !c.current {
			if full == nil {
				full = bytes.Join(msg.Full, nil)
			}
			out, c.current = full, true
		}
		if len(out) == 0 {
			continue
		}
		select {
		case c.send <- out:
		default:
			st.h.dropped.Add(1)
			st.h.log.Info("dropping slow websocket client", "pending", len(c.send))
			st.drop(c)
		}
	}
}

// Register adds a client; it first receives the last broadcast message, if
// any. It fails when ctx is done or the hub has stopped.
func (h *Hub) Register(ctx context.Context) (*Client, error) {
	c := &Client{send: make(chan []byte, h.bufSize), done: make(chan struct{})}
	select {
	case h.register <- c:
		return c, nil
	case <-h.stopped:
		return nil, ErrHubStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Unregister removes c; it is safe to call more than once and after the hub
// stopped.
func (h *Hub) Unregister(c *Client) {
	select {
	case h.unregister <- c:
	case <-h.stopped:
	}
}

// Broadcast publishes msg as the whole fragment (Publish with msg as both
// the delta and the whole).
func (h *Hub) Broadcast(ctx context.Context, msg []byte) bool {
	return h.Publish(ctx, Message{Delta: msg, Full: [][]byte{msg}})
}

// Publish queues msg.Delta for every client that has had every publication
// since it joined and the whole fragment for every other, and remembers the
// whole fragment for clients that register later. It returns false when
// ctx is done or the hub stopped before the message was taken.
func (h *Hub) Publish(ctx context.Context, msg Message) bool {
	select {
	case h.broadcast <- msg:
		return true
	case <-h.stopped:
		return false
	case <-ctx.Done():
		return false
	}
}

// DropAll disconnects every client (their browsers reconnect). It is the
// operator's and the tests' way to exercise reconnection.
func (h *Hub) DropAll(ctx context.Context) {
	select {
	case h.dropAll <- struct{}{}:
	case <-h.stopped:
	case <-ctx.Done():
	}
}

// Wanted receives a value (coalesced) when a client joined and the hub had
// no fragment for it: nobody was connected since the last broadcast. A
// publisher that publishes only while Clients() > 0 publishes on it.
func (h *Hub) Wanted() <-chan struct{} { return h.wanted }

// Clients is the number of connected clients (a gauge).
func (h *Hub) Clients() int { return int(h.clients.Load()) }

// Dropped counts clients dropped for being slow since the hub started.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }
