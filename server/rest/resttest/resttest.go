// Package resttest helps tests and benchmarks talk to a broker over real
// mTLS: a throw-away federation PKI made by package pki, JSON clients that
// present a member cluster's certificate, and serving a Fiber app on a
// loopback TLS listener.
package resttest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

// PKI is a federation PKI in a temporary directory.
type PKI struct {
	Dir string
	CA  *pki.CA
}

// NewPKI runs pki.Init in a fresh temporary directory.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	if err := pki.Init(dir, nil, false, time.Now()); err != nil {
		tb.Fatalf("pki init: %v", err)
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		tb.Fatalf("load CA: %v", err)
	}
	return &PKI{Dir: dir, CA: ca}
}

// ServerTLS is the broker's listener configuration.
func (p *PKI) ServerTLS(tb testing.TB) *tls.Config {
	tb.Helper()
	cfg, err := pki.ServerTLSConfig(p.Dir)
	if err != nil {
		tb.Fatalf("server TLS config: %v", err)
	}
	return cfg
}

// ClientTLS returns a client configuration presenting a certificate for
// clusterID with role ("" = a legacy certificate without role). With
// clusterID "" no client certificate is presented.
func (p *PKI) ClientTLS(tb testing.TB, clusterID string, role api.Role) *tls.Config {
	tb.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.CA.Certificate())
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1"}
	if clusterID == "" {
		return cfg
	}
	certPEM, keyPEM, err := p.CA.IssueClient(clusterID, role, time.Now())
	if err != nil {
		tb.Fatalf("issue client certificate for %s: %v", clusterID, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		tb.Fatalf("client key pair: %v", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg
}

// Client is a JSON client of the Broker API for one member cluster.
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// NewClient returns a client of baseURL presenting a certificate for
// clusterID and role (see ClientTLS). It speaks HTTP/1.1 like the agents
// and keeps up to maxConns connections.
func (p *PKI) NewClient(tb testing.TB, baseURL, clusterID string, role api.Role, maxConns int) *Client {
	tb.Helper()
	tr := &http.Transport{
		TLSClientConfig:     p.ClientTLS(tb, clusterID, role),
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return &Client{BaseURL: baseURL, HTTP: &http.Client{Transport: tr, Timeout: 90 * time.Second}}
}

// Response is a broker answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode decodes the body into v.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d body %q: %w", r.Status, r.Body, err)
	}
	return nil
}

// Error decodes the body as an ErrorResponse (zero value if it is not one).
func (r *Response) Error() api.ErrorResponse {
	var e api.ErrorResponse
	_ = json.Unmarshal(r.Body, &e)
	return e
}

// Do sends method path with body (nil: no body; []byte or string: raw;
// anything else: JSON) and header name/value pairs.
func (c *Client) Do(ctx context.Context, method, path string, body any, header ...string) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	req.Header.Set("Accept", "application/json; charset=utf-8")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Must is Do that fails tb on a transport error.
func (c *Client) Must(tb testing.TB, method, path string, body any, header ...string) *Response {
	tb.Helper()
	r, err := c.Do(context.Background(), method, path, body, header...)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Serve serves app on a loopback TLS listener until the test ends and
// returns its https base URL.
func Serve(tb testing.TB, app *fiber.App, cfg *tls.Config) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Listener(tls.NewListener(ln, cfg)) }()
	tb.Cleanup(func() {
		if err := app.ShutdownWithTimeout(10 * time.Second); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			tb.Errorf("serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String()
}
