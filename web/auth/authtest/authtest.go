// Package authtest lets tests of the login throttles act as clients from
// distinct source addresses over real loopback connections (Linux routes
// all of 127.0.0.0/8 to the loopback interface).
package authtest

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Serve serves app on a fresh 127.0.0.1 listener until the test ends and
// returns its base URL.
func Serve(tb testing.TB, app *fiber.App) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = app.Listener(ln)
	}()
	tb.Cleanup(func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		_ = ln.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// ClientFrom returns an HTTP client whose connections leave from ip (a
// loopback address such as 127.0.0.2) and that does not follow redirects.
func ClientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:       nil,
			DialContext: d.DialContext,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
}
