package rest

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"path/filepath"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/bolt"
)

// chainPeer is the verified client certificate of every benchmark request.
func chainPeer(cn string, role api.Role) func(*fiber.Ctx) (*x509.Certificate, bool) {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: []string{pki.RoleOUPrefix + string(role)}}}
	return func(*fiber.Ctx) (*x509.Certificate, bool) { return cert, true }
}

// serveOnce runs one request through the application's handler (the whole
// middleware chain and the real domain, no socket and no TLS), reusing ctx
// as fasthttp does for the requests of one connection.
func serveOnce(tb testing.TB, h fasthttp.RequestHandler, ctx *fasthttp.RequestCtx, status int) {
	ctx.Response.Reset()
	ctx.ResetUserValues()
	h(ctx)
	if got := ctx.Response.StatusCode(); got != status {
		tb.Fatalf("%s %s: status %d, want %d: %s", ctx.Method(), ctx.RequestURI(), got, status, ctx.Response.Body())
	}
}

// newChainCtx prepares a request as fasthttp parses it from a connection.
func newChainCtx(method, uri string, body []byte) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.SetHost("broker.example")
	req.Header.Set(api.HeaderRequestID, "bench-request")
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return ctx
}

// BenchmarkRequestChain measures the broker's own work per request (the
// middleware chain, the handler, the domain and the JSON answer; no TLS,
// no socket) for the two calls every consumer agent makes every few
// seconds: an instruction poll with nothing pending and its node-group
// list. allocs/op is the number to watch.
func BenchmarkRequestChain(b *testing.B) {
	st, err := bolt.OpenFile(filepath.Join(b.TempDir(), "broker.db"), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	chunks := placement.DefaultChunkConfig()
	svc, err := reservations.New(reservations.Config{Store: st, ChunkConfig: chunks, Placer: placement.NewIndex(chunks)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = svc.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-runDone
		if err := svc.Close(); err != nil {
			b.Errorf("close: %v", err)
		}
	})
	app := func(cn string, role api.Role) fasthttp.RequestHandler {
		return NewApp(Config{
			Broker: svc, RateLimitBurst: 1_000_000, RateLimitRPS: 1_000_000,
			Metrics: prometheus.NewRegistry(), BaseContext: func() context.Context { return ctx },
			peer: chainPeer(cn, role),
		}).Handler()
	}
	provider, consumer := app("prov-a", api.RoleProvider), app("cons-a", api.RoleConsumer)
	for i, p := range []string{"prov-a", "prov-b", "prov-c"} {
		ad := `{"clusterId":"` + p + `","liqoClusterId":"liqo-` + p + `","resources":{"cpu":"64","memory":"256Gi"},"unitPrices":{"cpu":"0.0` + string(rune('1'+i)) + `"}}`
		h := provider
		if p != "prov-a" {
			h = app(p, api.RoleProvider)
		}
		serveOnce(b, h, newChainCtx(fiber.MethodPost, "/api/v1/advertisements", []byte(ad)), 200)
	}
	serveOnce(b, consumer, newChainCtx(fiber.MethodPost, "/api/v1/heartbeat",
		[]byte(`{"clusterId":"cons-a","liqoClusterId":"liqo-cons-a","placement":{"type":"Price"}}`)), 200)

	for _, bc := range []struct {
		name string
		uri  string
	}{
		{"instructions", "/api/v1/instructions"},
		{"nodegroups", "/api/v1/nodegroups"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rctx := newChainCtx(fiber.MethodGet, bc.uri, nil)
			serveOnce(b, consumer, rctx, 200)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				serveOnce(b, consumer, rctx, 200)
			}
		})
	}
}
