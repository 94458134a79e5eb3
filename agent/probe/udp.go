package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"k8s.io/utils/clock"
)

// probeLen is a probe datagram's length: Payload and the sequence number.
const probeLen = len(Payload) + 8

// UDP is the real network: each probe is a datagram to the endpoint's echo
// responder, timed from its send to the arrival of the reply that carries
// its own sequence number.
type UDP struct {
	// Source is the address probes leave from (invalid: the kernel's
	// choice).
	Source netip.Addr
	// Clock times the probes (nil: the real clock).
	Clock clock.PassiveClock
}

// Probe implements Network. Each call has its own socket, so replies to
// another call's probes never reach it; within the call, a reply whose
// sequence number is not the probe's (a late reply to an earlier one) is
// discarded and the probe waits on until its own deadline.
func (u UDP) Probe(ctx context.Context, ep string, n int, timeout time.Duration) ([]time.Duration, error) {
	clk := u.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var d net.Dialer
	if u.Source.IsValid() {
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(u.Source, 0))
	}
	conn, err := d.DialContext(ctx, "udp", ep)
	if err != nil {
		return nil, fmt.Errorf("probe endpoint %q: %w", ep, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	out := make([]byte, probeLen)
	copy(out, Payload)
	in := make([]byte, 64)
	var rtts []time.Duration
	for seq := range uint64(n) {
		if ctx.Err() != nil {
			return rtts, ctx.Err()
		}
		binary.BigEndian.PutUint64(out[len(Payload):], seq)
		if rtt, ok := exchange(conn, clk, out, in, timeout); ok {
			rtts = append(rtts, rtt)
		}
	}
	if len(rtts) == 0 {
		return nil, fmt.Errorf("probe endpoint %q: no reply to %d probes within %s each", ep, n, timeout)
	}
	return rtts, nil
}

// exchange sends probe out and waits until timeout for the datagram that
// echoes it exactly, discarding any other; it returns the round trip.
func exchange(conn net.Conn, clk clock.PassiveClock, out, in []byte, timeout time.Duration) (time.Duration, bool) {
	start := clk.Now()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, false
	}
	if _, err := conn.Write(out); err != nil {
		return 0, false
	}
	for {
		k, err := conn.Read(in)
		if err != nil {
			// The deadline, the call's end, or an ICMP error (nothing
			// listens there) surfacing on the connected socket: lost.
			return 0, false
		}
		if k == len(out) && bytes.Equal(in[:k], out) {
			return clk.Since(start), true
		}
		// A late reply to an earlier probe (or garbage): not this one's.
	}
}
