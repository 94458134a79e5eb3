package netguard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/netguard"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        netguard.Limits
		listeners int
		fds       uint64
		want      netguard.Limits
		err       string
	}{
		{name: "automatic, plenty of descriptors", listeners: 2, fds: 1 << 20,
			want: netguard.Limits{MaxConns: netguard.AutoMaxConnsCeiling, MaxConnsPerIP: netguard.AutoMaxConnsPerIPCeiling, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "automatic, unknown or unlimited descriptors", listeners: 2, fds: 0,
			want: netguard.Limits{MaxConns: netguard.AutoMaxConnsCeiling, MaxConnsPerIP: netguard.AutoMaxConnsPerIPCeiling, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "automatic, ulimit -n 1024, two listeners", listeners: 2, fds: 1024,
			want: netguard.Limits{MaxConns: 256, MaxConnsPerIP: 64, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "automatic, ulimit -n 256, three listeners", listeners: 3, fds: 256,
			want: netguard.Limits{MaxConns: 42, MaxConnsPerIP: 10, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "no listener counts as one", listeners: 0, fds: 256,
			want: netguard.Limits{MaxConns: 128, MaxConnsPerIP: 32, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "explicit within budget", in: netguard.Limits{MaxConns: 400, MaxConnsPerIP: 400, HandshakeTimeout: 2 * time.Second}, listeners: 2, fds: 1024,
			want: netguard.Limits{MaxConns: 400, MaxConnsPerIP: 400, HandshakeTimeout: 2 * time.Second}},
		{name: "explicit total, automatic per address", in: netguard.Limits{MaxConns: 20}, listeners: 1, fds: 1024,
			want: netguard.Limits{MaxConns: 20, MaxConnsPerIP: 5, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "tiny explicit total keeps one per address", in: netguard.Limits{MaxConns: 2}, listeners: 1, fds: 1024,
			want: netguard.Limits{MaxConns: 2, MaxConnsPerIP: 1, HandshakeTimeout: netguard.DefaultHandshakeTimeout}},
		{name: "explicit over the descriptor budget", in: netguard.Limits{MaxConns: 500}, listeners: 2, fds: 1024,
			err: "--max-conns 500 on 2 listeners can hold 1000 file descriptors, but the process may open only 1024 (ulimit -n) and needs 64 for its own work: lower --max-conns to at most 480"},
		{name: "per address above the total", in: netguard.Limits{MaxConns: 10, MaxConnsPerIP: 11}, listeners: 1, fds: 1 << 20,
			err: "--max-conns-per-ip 11 is above the per-listener cap of 10"},
		{name: "per address above the automatic total", in: netguard.Limits{MaxConnsPerIP: 100}, listeners: 2, fds: 256,
			err: "--max-conns-per-ip 100 is above the per-listener cap of 64"},
		{name: "descriptors too few for the listeners", listeners: 4, fds: 6,
			err: "the file-descriptor limit 6 (ulimit -n) is too low for 4 listeners"},
		{name: "negative total", in: netguard.Limits{MaxConns: -1}, listeners: 1, err: "--max-conns must be >= 0"},
		{name: "negative per address", in: netguard.Limits{MaxConnsPerIP: -3}, listeners: 1, err: "--max-conns-per-ip must be >= 0"},
		{name: "negative handshake timeout", in: netguard.Limits{HandshakeTimeout: -time.Second}, listeners: 1, err: "--handshake-timeout must be between 0"},
		{name: "handshake timeout too long", in: netguard.Limits{HandshakeTimeout: 2 * time.Minute}, listeners: 1, err: "--handshake-timeout must be between 0 (the default, 5s) and 1m0s, got 2m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Resolve(tc.listeners, tc.fds)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFDLimitIsTheProcesssLimit(t *testing.T) {
	if netguard.FDLimit() == 0 {
		t.Fatal("FDLimit is 0 on a system with getrlimit")
	}
}
