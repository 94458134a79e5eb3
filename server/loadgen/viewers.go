package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// viewers are websocket subscribers of the live dashboard, like a browser
// with the dashboard open: they read every pushed fragment.
type viewers struct {
	messages atomic.Int64
	bytes    atomic.Int64
}

func (v *viewers) start(ctx context.Context, dashboard string, n int, wg *sync.WaitGroup) error {
	u, err := url.Parse(dashboard)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("loadgen: dashboard URL %q: want http://host:port", dashboard)
	}
	origin := u.Scheme + "://" + u.Host
	ws := "ws" + strings.TrimPrefix(origin, "http") + strings.TrimSuffix(u.Path, "/") + "/ws"
	for range n {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, _, err := websocket.Dial(dctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
		cancel()
		if err != nil {
			return fmt.Errorf("loadgen: dashboard viewer %s: %w", ws, err)
		}
		c.SetReadLimit(64 << 20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = c.CloseNow() }()
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				v.messages.Add(1)
				v.bytes.Add(int64(len(b)))
			}
		}()
	}
	return nil
}
