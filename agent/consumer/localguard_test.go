package consumer

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

const reserveBody = `{"providerClusterId":"p","chunkCount":1,"chunkType":"standard"}`

// TestLocalGuardRefusesWebPages sends what a browser page can send to the
// local API (simple cross-origin POSTs, DNS rebinding) and what the adapter
// sends, and checks that only the latter reaches the broker.
func TestLocalGuardRefusesWebPages(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		host       string
		header     map[string]string
		body       string
		wantStatus int
		wantCode   string
	}{
		{name: "adapter reserve", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "application/json"}, body: reserveBody, wantStatus: 201},
		{name: "json with charset", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, body: reserveBody, wantStatus: 201},
		{name: "cross-origin text/plain POST", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			body:   reserveBody, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "text/plain POST without browser headers", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "text/plain"}, body: reserveBody, wantStatus: 415, wantCode: api.CodeInvalidRequest},
		{name: "form POST", method: "POST", path: "/local/reservations", host: "localhost:9090",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "a=b", wantStatus: 415, wantCode: api.CodeInvalidRequest},
		{name: "multipart POST", method: "POST", path: "/local/reservations", host: "localhost:9090",
			header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, body: "--x--", wantStatus: 415, wantCode: api.CodeInvalidRequest},
		{name: "POST without Content-Type", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			body: reserveBody, wantStatus: 415, wantCode: api.CodeInvalidRequest},
		{name: "garbage Content-Type", method: "POST", path: "/local/reservations", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "application/json; ;;"}, body: reserveBody, wantStatus: 415, wantCode: api.CodeInvalidRequest},
		{name: "DNS rebinding GET", method: "GET", path: "/local/nodegroups", host: "rebind.evil.example:9090", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "DNS rebinding POST as JSON", method: "POST", path: "/local/reservations", host: "rebind.evil.example:9090",
			header: map[string]string{"Content-Type": "application/json"}, body: reserveBody, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "empty Host", method: "GET", path: "/local/nodegroups", host: "", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "foreign IP Host", method: "GET", path: "/local/nodegroups", host: "10.1.2.3:9090", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "sub.localhost is not localhost", method: "GET", path: "/local/nodegroups", host: "x.localhost:9090", wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "localhost", method: "GET", path: "/local/nodegroups", host: "LocalHost.:9090", wantStatus: 200},
		{name: "IPv6 loopback", method: "GET", path: "/local/nodegroups", host: "[::1]:9090", wantStatus: 200},
		{name: "loopback without port", method: "GET", path: "/local/nodegroups", host: "127.0.0.1", wantStatus: 200},
		{name: "other loopback address", method: "GET", path: "/local/nodegroups", host: "127.0.0.2:9090", wantStatus: 200},
		{name: "allowed extra name", method: "GET", path: "/local/nodegroups", host: "fa-agent.fa.svc:9090", wantStatus: 200},
		{name: "same-site page", method: "GET", path: "/local/nodegroups", host: "127.0.0.1:9090",
			header: map[string]string{"Sec-Fetch-Site": "same-site"}, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "cross-site GET", method: "GET", path: "/local/virtual-nodes", host: "127.0.0.1:9090",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "opened in the address bar", method: "GET", path: "/local/nodegroups", host: "127.0.0.1:9090",
			header: map[string]string{"Sec-Fetch-Site": "none"}, wantStatus: 200},
		{name: "same origin", method: "GET", path: "/local/nodegroups", host: "127.0.0.1:9090",
			header: map[string]string{"Origin": "http://127.0.0.1:9090", "Sec-Fetch-Site": "same-origin"}, wantStatus: 200},
		{name: "other port is another origin", method: "GET", path: "/local/nodegroups", host: "127.0.0.1:9090",
			header: map[string]string{"Origin": "http://127.0.0.1:8080"}, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "opaque origin", method: "DELETE", path: "/local/reservations/res-a", host: "127.0.0.1:9090",
			header: map[string]string{"Origin": "null"}, wantStatus: 403, wantCode: api.CodeForbidden},
		{name: "adapter release", method: "DELETE", path: "/local/reservations/res-a", host: "127.0.0.1:9090", wantStatus: 202},
		{name: "DELETE with a text body", method: "DELETE", path: "/local/reservations/res-a", host: "127.0.0.1:9090",
			header: map[string]string{"Content-Type": "text/plain"}, body: "x", wantStatus: 415, wantCode: api.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &stubBroker{reserveStatus: []int{201}, releaseStatus: 202}
			a := newTestAgent(t, b)
			a.cfg.LocalAPIHosts = []string{"FA-Agent.fa.svc."}
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Host = tc.host
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			a.LocalAPI().ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if tc.wantCode != "" {
				var e api.ErrorResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != tc.wantCode || e.Message == "" {
					t.Fatalf("error body %s (%v), want code %s and a message", rec.Body, err, tc.wantCode)
				}
				if len(b.reserveIDs) != 0 {
					t.Fatalf("a refused request reached the broker: %v", b.reserveIDs)
				}
			}
		})
	}
}

// TestLocalGuardAcceptsTheListeningIP: listening beyond loopback, the API is
// called by the IP the connection was made to.
func TestLocalGuardAcceptsTheListeningIP(t *testing.T) {
	a := newTestAgent(t, &stubBroker{})
	local := &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 9090}
	for host, want := range map[string]int{"10.0.0.5:9090": 200, "10.0.0.6:9090": 403} {
		req := httptest.NewRequest("GET", "/local/nodegroups", nil)
		req.Host = host
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
		rec := httptest.NewRecorder()
		a.LocalAPI().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s on a connection to %s: %d, want %d: %s", host, local, rec.Code, want, rec.Body)
		}
	}
}

// TestAdapterClientPassesTheGuard drives the guarded API over real HTTP
// with the adapter's client.
func TestAdapterClientPassesTheGuard(t *testing.T) {
	b := &stubBroker{reserveStatus: []int{201}, releaseStatus: 202}
	a := newTestAgent(t, b)
	srv := httptest.NewServer(a.LocalAPI())
	defer srv.Close()
	for _, base := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		c, err := localapi.NewClient(base, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.NodeGroups(ctx); err != nil {
			t.Fatalf("%s: node groups: %v", base, err)
		}
		if _, err := c.VirtualNodes(ctx); err != nil {
			t.Fatalf("%s: virtual nodes: %v", base, err)
		}
		if _, err := c.Release(ctx, "res-a"); err != nil {
			t.Fatalf("%s: release: %v", base, err)
		}
	}
	c, _ := localapi.NewClient(srv.URL, nil)
	if _, err := c.Reserve(context.Background(), "res-a", api.ReservationRequest{ProviderClusterID: "p", ChunkCount: 1, ChunkType: api.ChunkStandard}); err != nil {
		t.Fatalf("reserve: %v", err)
	}
}
