package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gofiber/fiber/v2"
)

func startHub(t *testing.T, buf int) (*Hub, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := NewHub(nil, buf)
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, ctx
}

func recv(t *testing.T, c *Client) string {
	t.Helper()
	select {
	case m := <-c.Send():
		return string(m)
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
		return ""
	}
}

func TestHubFanOutAndLateJoiner(t *testing.T) {
	h, ctx := startHub(t, 4)
	var clients []*Client
	for range 3 {
		c, err := h.Register(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	if !h.Broadcast(ctx, []byte("one")) {
		t.Fatal("broadcast refused")
	}
	for i, c := range clients {
		if got := recv(t, c); got != "one" {
			t.Fatalf("client %d got %q", i, got)
		}
	}
	late, err := h.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, late); got != "one" {
		t.Fatalf("a late joiner gets the last message first; got %q", got)
	}
	if h.Clients() != 4 {
		t.Fatalf("Clients() = %d, want 4", h.Clients())
	}
	h.Unregister(clients[0])
	h.Unregister(clients[0]) // idempotent
	select {
	case <-clients[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("unregistered client not done")
	}
}

func TestHubKeepsAFragmentOnlyWhileWatched(t *testing.T) {
	h, ctx := startHub(t, 4)
	// wanted waits up to patience for the signal: generous where it must
	// come (a loaded machine may not run the hub for a while), short where
	// it must not (a late signal would still be seen by the next check).
	wanted := func(patience time.Duration) bool {
		select {
		case <-h.Wanted():
			return true
		case <-time.After(patience):
			return false
		}
	}
	h.Broadcast(ctx, []byte("nobody"))
	a, err := h.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !wanted(10 * time.Second) {
		t.Fatal("a client joining a hub without a fragment must signal Wanted")
	}
	h.Broadcast(ctx, []byte("one"))
	if got := recv(t, a); got != "one" {
		t.Fatalf("got %q, want one (the broadcast without clients is discarded)", got)
	}
	b, _ := h.Register(ctx)
	if got := recv(t, b); got != "one" {
		t.Fatalf("a joiner while others watch gets the current fragment; got %q", got)
	}
	if wanted(100 * time.Millisecond) {
		t.Fatal("Wanted signalled although the hub had a fragment")
	}
	h.Unregister(a)
	h.Unregister(b)
	<-b.Done()
	c, _ := h.Register(ctx)
	if !wanted(10 * time.Second) {
		t.Fatal("after the last client left, the fragment must be forgotten and a joiner must signal Wanted")
	}
	select {
	case m := <-c.Send():
		t.Fatalf("a stale fragment %q was handed to a client joining an empty hub", m)
	default:
	}
}

func TestHubDropsSlowClient(t *testing.T) {
	h, ctx := startHub(t, 2)
	slow, _ := h.Register(ctx)
	fast, _ := h.Register(ctx)
	// The reading client takes each message before the next broadcast; the
	// slow one never reads and overflows its 2-slot buffer at the third.
	var msgs []string
	for i := range 5 {
		h.Broadcast(ctx, []byte(fmt.Sprint(i)))
		msgs = append(msgs, recv(t, fast))
	}
	select {
	case <-slow.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow client was not dropped")
	}
	if strings.Join(msgs, ",") != "0,1,2,3,4" {
		t.Fatalf("the reading client got %v, want all five in order", msgs)
	}
	if h.Dropped() != 1 {
		t.Fatalf("Dropped() = %d, want 1", h.Dropped())
	}
	select {
	case <-fast.Done():
		t.Fatal("the reading client was dropped")
	default:
	}
}

func TestHubDropAllAndStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := NewHub(nil, 1)
	stopped := make(chan struct{})
	go func() { defer close(stopped); h.Run(ctx) }()
	a, _ := h.Register(ctx)
	h.DropAll(ctx)
	<-a.Done()
	b, _ := h.Register(ctx)
	cancel()
	<-stopped
	<-b.Done()
	if _, err := h.Register(context.Background()); !errors.Is(err, ErrHubStopped) {
		t.Fatalf("Register after stop: %v, want ErrHubStopped", err)
	}
	if h.Broadcast(context.Background(), []byte("x")) {
		t.Fatal("Broadcast after stop reported delivery")
	}
}

// TestWebsocketThroughFiber proves the fasthttp hijack path end to end over
// a real loopback socket: handshake, pushed messages, same-origin check and
// server-side drop.
func TestWebsocketThroughFiber(t *testing.T) {
	h, ctx := startHub(t, 4)
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ReadTimeout: time.Second})
	app.Get("/ws", Handler(ctx, h, WSOptions{PingInterval: 50 * time.Millisecond}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	url := "ws://" + ln.Addr().String() + "/ws"

	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://" + ln.Addr().String()}}})
	if err != nil {
		t.Fatalf("dial through the hijack: %v", err)
	}
	defer func() { _ = c.CloseNow() }()
	// The client joined a hub without a fragment: the hub asks for one.
	select {
	case <-h.Wanted():
	case <-dctx.Done():
		t.Fatal("the hub did not ask for a fragment for its first client")
	}
	h.Broadcast(ctx, []byte(`<div id="a">first</div>`))
	read := func() string {
		_, b, err := c.Read(dctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return string(b)
	}
	if got := read(); got != `<div id="a">first</div>` {
		t.Fatalf("first message %q", got)
	}
	// Outlive fasthttp's 1s read timeout: the hijacked socket has no deadline.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		h.Broadcast(ctx, []byte("tick"))
		if got := read(); got != "tick" {
			t.Fatalf("got %q", got)
		}
	}
	h.DropAll(ctx)
	_, _, err = c.Read(dctx)
	if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("after DropAll: %v, want close status TryAgainLater", err)
	}

	_, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin handshake: err %v resp %v, want 403", err, resp)
	}
	r, err := http.Get("http://" + ln.Addr().String() + "/ws")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain GET: %d, want 426", r.StatusCode)
	}
}

// TestHubSendsDeltasOnlyToCurrentClients: a client gets a publication's
// delta only when it had the whole fragment and every publication since;
// a client that joins gets the whole fragment, at once when the hub has
// one, else with the next publication; an empty delta sends nothing.
func TestHubSendsDeltasOnlyToCurrentClients(t *testing.T) {
	h, ctx := startHub(t, 8)
	publish := func(delta string, full ...string) {
		t.Helper()
		parts := make([][]byte, len(full))
		for i, p := range full {
			parts[i] = []byte(p)
		}
		if !h.Publish(ctx, Message{Delta: []byte(delta), Full: parts}) {
			t.Fatal("publication refused")
		}
	}
	nothing := func(c *Client, name string) {
		t.Helper()
		// The hub handles one message at a time: once a later
		// publication reached a, any earlier one would be before it.
		select {
		case m := <-c.Send():
			t.Fatalf("%s got %q, want nothing", name, m)
		default:
		}
	}
	mustWant := func() {
		t.Helper()
		select {
		case <-h.Wanted():
		case <-time.After(10 * time.Second):
			t.Fatal("a client joining a hub without a fragment did not signal Wanted within 10s")
		}
	}
	a, err := h.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustWant()
	publish("<b1>", "<a1>", "<b1>")
	if got := recv(t, a); got != "<a1><b1>" {
		t.Fatalf("a client that joined before any fragment got %q, want the whole fragment", got)
	}
	b, _ := h.Register(ctx)
	if got := recv(t, b); got != "<a1><b1>" {
		t.Fatalf("a joiner got %q, want the last whole fragment", got)
	}
	publish("<b2>", "<a1>", "<b2>")
	for name, c := range map[string]*Client{"a": a, "b": b} {
		if got := recv(t, c); got != "<b2>" {
			t.Fatalf("%s got %q, want the delta", name, got)
		}
	}
	publish("", "<a1>", "<b2>") // nothing changed
	publish("<a3>", "<a3>", "<b2>")
	for name, c := range map[string]*Client{"a": a, "b": b} {
		if got := recv(t, c); got != "<a3>" {
			t.Fatalf("%s got %q, want the delta after an empty one was skipped", name, got)
		}
		nothing(c, name)
	}
	c, _ := h.Register(ctx)
	if got := recv(t, c); got != "<a3><b2>" {
		t.Fatalf("a late joiner got %q, want the whole fragment of the last publication", got)
	}
	for _, x := range []*Client{a, b, c} {
		h.Unregister(x)
		<-x.Done()
	}
	d, _ := h.Register(ctx)
	mustWant()
	publish("<b4>", "<a4>", "<b4>")
	if got := recv(t, d); got != "<a4><b4>" {
		t.Fatalf("a client joining an empty hub got %q, want the whole fragment of the next publication, not its delta", got)
	}
}
