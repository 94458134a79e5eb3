package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestBackoffDoublesFrom5msTo1s(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 10 {
		d = backoff(d)
		got = append(got, d)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoff sequence %v, want %v ms", got, want)
		}
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func acceptErr(e error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", e)}
}

func TestTemporaryAcceptErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{acceptErr(syscall.EMFILE), true},
		{acceptErr(syscall.ENFILE), true},
		{acceptErr(syscall.ECONNABORTED), true},
		{acceptErr(syscall.ENOBUFS), true},
		{acceptErr(syscall.ENOMEM), true},
		{acceptErr(syscall.EPROTO), true},
		{fmt.Errorf("wrapped: %w", acceptErr(syscall.EMFILE)), true},
		{timeoutErr{}, true},
		{&net.OpError{Op: "accept", Err: timeoutErr{}}, true},
		{acceptErr(syscall.EBADF), false},
		{acceptErr(syscall.EINVAL), false},
		{acceptErr(syscall.ENOTSOCK), false},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{errors.New("something else"), false},
	} {
		if got := temporary(tc.err); got != tc.want {
			t.Errorf("temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestPeerKeyGroupsIPv6By64(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 2}, "2001:db8:1:2::"},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, "invalid IP"},
	} {
		if got := peerKey(tc.addr); got.String() != tc.want {
			t.Errorf("peerKey(%v) = %v, want %s", tc.addr, got, tc.want)
		}
	}
	if peerKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1")}) == (netip.MustParseAddr("2001:db8:1:2::")) {
		t.Error("two /64s share a key")
	}
}
