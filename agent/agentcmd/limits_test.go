package agentcmd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
)

// TestListenerLimitsValidatedFirst: bad connection limits are refused with
// the flag's name before the agent reads its bundle or dials anything.
func TestListenerLimitsValidatedFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits netguard.Limits
		want   string
	}{
		{"negative total", netguard.Limits{MaxConns: -1}, "--max-conns must be >= 0"},
		{"per address above the total", netguard.Limits{MaxConns: 10, MaxConnsPerIP: 11}, "--max-conns-per-ip 11 is above the per-listener cap of 10"},
		{"handshake timeout too long", netguard.Limits{HandshakeTimeout: time.Hour}, "--handshake-timeout must be between 0"},
		{"beyond the descriptor limit", netguard.Limits{MaxConns: 1 << 30}, "(ulimit -n)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Role: "consumer", Bundle: "/nonexistent/bundle.tar.gz", HealthListen: ":0", LocalAPIListen: ":0", Limits: tc.limits}
			err := Run(context.Background(), o, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error containing %q (and no attempt to read the bundle)", err, tc.want)
			}
		})
	}
}
