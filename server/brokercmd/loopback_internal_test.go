package brokercmd

import (
	"net"
	"testing"
)

// TestIsLoopback: only a loopback listener counts as private; ":9444"
// (every interface) and a routable address are open to the network, and
// get the broker's loud warning when there is no --dashboard-token.
func TestIsLoopback(t *testing.T) {
	cases := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 9444}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 9444}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9444}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9444}, false},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 9444}, false},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, false},
	}
	for _, c := range cases {
		if got := isLoopback(c.addr); got != c.want {
			t.Errorf("isLoopback(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
	if host, _, _ := net.SplitHostPort(DefaultDashboardListen); !net.ParseIP(host).IsLoopback() {
		t.Fatalf("the default dashboard address %s is not loopback", DefaultDashboardListen)
	}
}
