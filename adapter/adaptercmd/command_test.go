package adaptercmd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/adaptercmd"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/externalgrpc/protos"
	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi/localapitest"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/pki"
)

func TestValidate(t *testing.T) {
	base := adaptercmd.Options{Listen: ":8086", AgentURL: "http://127.0.0.1:9090", CacheTTL: 2 * time.Second}
	tests := []struct {
		name string
		mod  func(*adaptercmd.Options)
		want string
	}{
		{"no tls and not insecure", func(*adaptercmd.Options) {}, "--tls-dir is required"},
		{"both", func(o *adaptercmd.Options) { o.Insecure, o.TLSDir = true, "/x" }, "exclude each other"},
		{"no listen", func(o *adaptercmd.Options) { o.Insecure, o.Listen = true, "" }, "--listen"},
		{"no agent", func(o *adaptercmd.Options) { o.Insecure, o.AgentURL = true, "" }, "--agent-url"},
		{"bad ttl", func(o *adaptercmd.Options) { o.Insecure, o.CacheTTL = true, 0 }, "--cache-ttl"},
		{"negative max conns", func(o *adaptercmd.Options) { o.Insecure, o.Limits.MaxConns = true, -1 }, "--max-conns must be >= 0"},
		{"handshake timeout too long", func(o *adaptercmd.Options) { o.Insecure, o.Limits.HandshakeTimeout = true, time.Hour }, "--handshake-timeout"},
		{"drain utilization above 2", func(o *adaptercmd.Options) { o.Insecure, o.DrainUtilization = true, 2.5 }, "--consolidation-drain-utilization"},
		{"negative drain unneeded time", func(o *adaptercmd.Options) { o.Insecure, o.DrainUnneededTime = true, -time.Second }, "--consolidation-unneeded-time"},
		{"ok drain settings", func(o *adaptercmd.Options) {
			o.Insecure, o.DrainUtilization, o.DrainUnneededTime = true, 0.9, 30*time.Second
		}, ""},
		{"ok insecure", func(o *adaptercmd.Options) { o.Insecure = true }, ""},
		{"ok mtls", func(o *adaptercmd.Options) { o.TLSDir = "/x" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mod(&o)
			err := o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// start runs the adapter and returns its address; it stops with the test.
func start(t *testing.T, o adaptercmd.Options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- adaptercmd.Run(ctx, o, slog.New(slog.DiscardHandler), func(a net.Addr) { addrc <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after shutdown", err)
		}
	})
	select {
	case a := <-addrc:
		return a.String()
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("adapter did not start")
	}
	return ""
}

func fakeAgentURL(t *testing.T) string {
	return localapitest.New(api.NodeGroupView{ID: "ng-p1-standard", ProviderClusterID: "p1", Type: api.ChunkStandard, MaxSize: 2}).Start(t)
}

func refresh(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := protos.NewCloudProviderClient(conn)
	if _, err := cl.Refresh(ctx, &protos.RefreshRequest{}); err != nil {
		return err
	}
	r, err := cl.NodeGroups(ctx, &protos.NodeGroupsRequest{})
	if err == nil && len(r.GetNodeGroups()) != 1 {
		t.Fatalf("node groups = %v", r.GetNodeGroups())
	}
	return err
}

func TestRunInsecure(t *testing.T) {
	addr := start(t, adaptercmd.Options{Listen: "127.0.0.1:0", AgentURL: fakeAgentURL(t), Insecure: true, CacheTTL: time.Second, ShutdownTimeout: time.Second})
	if err := refresh(t, addr, insecure.NewCredentials()); err != nil {
		t.Fatal(err)
	}
}

// TestRunMTLS connects the way CA does with a cloud-config cert/key/cacert:
// ServerName = host of the address, client certificate from the adapter PKI.
func TestRunMTLS(t *testing.T) {
	dir := t.TempDir()
	if err := pki.InitAdapter(dir, nil, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	addr := start(t, adaptercmd.Options{Listen: "127.0.0.1:0", AgentURL: fakeAgentURL(t), TLSDir: dir, CacheTTL: time.Second, ShutdownTimeout: time.Second})

	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad ca.crt")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.AdapterClientCertFile), filepath.Join(dir, pki.AdapterClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := refresh(t, addr, credentials.NewTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: pool, Certificates: []tls.Certificate{cert}})); err != nil {
		t.Fatalf("CA-style mTLS client: %v", err)
	}
	if err := refresh(t, addr, credentials.NewTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: pool})); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if err := refresh(t, addr, insecure.NewCredentials()); err == nil {
		t.Fatal("a plaintext client was served")
	}
}
