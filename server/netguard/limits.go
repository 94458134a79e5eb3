package netguard

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// Defaults and bounds of Limits.
const (
	// DefaultHandshakeTimeout is how long a new connection may take to
	// finish its TLS handshake (or, on a plain listener, to send its first
	// byte).
	DefaultHandshakeTimeout = 5 * time.Second
	// MaxHandshakeTimeout bounds --handshake-timeout: a longer one lets a
	// silent peer hold its slot for longer than any real client needs.
	MaxHandshakeTimeout = time.Minute
	// AutoMaxConnsCeiling caps the automatic per-listener connection cap
	// when file descriptors are plentiful (it bounds memory instead).
	AutoMaxConnsCeiling = 16384
	// AutoMaxConnsPerIPCeiling caps the automatic per-address cap.
	AutoMaxConnsPerIPCeiling = 128
	// ReservedFDs is the least number of file descriptors explicit caps
	// must leave to the process for its own work (its store, its logs,
	// its outgoing calls). The automatic caps leave half of the limit.
	ReservedFDs = 64
)

// Limits bound what one listener holds. The zero value means "automatic"
// for every field: see Resolve.
type Limits struct {
	// MaxConns caps the connections one listener holds at once, from
	// accept to close (0: automatic).
	MaxConns int
	// MaxConnsPerIP caps them per remote address; IPv6 peers are counted
	// per /64, the block one subscriber usually gets (0: automatic).
	MaxConnsPerIP int
	// HandshakeTimeout is the time a new connection has to finish its TLS
	// handshake (TLS listeners) or to send its first byte (plain
	// listeners) before it is closed; the server never sees it until then
	// (0: DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
}

// AddFlags binds --max-conns, --max-conns-per-ip and --handshake-timeout to
// l.
func (l *Limits) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&l.MaxConns, "max-conns", 0, fmt.Sprintf(
		"connections each listener holds at once; more are closed at accept (0: automatic, half the file-descriptor limit shared among the listeners, at most %d)", AutoMaxConnsCeiling))
	fs.IntVar(&l.MaxConnsPerIP, "max-conns-per-ip", 0, fmt.Sprintf(
		"connections each listener holds at once from one remote address (IPv6: one /64); more are closed at accept (0: automatic, a quarter of --max-conns, at most %d)", AutoMaxConnsPerIPCeiling))
	fs.DurationVar(&l.HandshakeTimeout, "handshake-timeout", DefaultHandshakeTimeout,
		"a new connection is closed unless it finishes its TLS handshake (TLS listeners) or sends its first byte (plain HTTP) within this time")
}

// Validate checks the values on their own (Resolve also checks them
// against the file-descriptor limit).
func (l Limits) Validate() error {
	var errs []error
	if l.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("--max-conns must be >= 0 (0: automatic), got %d", l.MaxConns))
	}
	if l.MaxConnsPerIP < 0 {
		errs = append(errs, fmt.Errorf("--max-conns-per-ip must be >= 0 (0: automatic), got %d", l.MaxConnsPerIP))
	}
	if l.HandshakeTimeout < 0 || l.HandshakeTimeout > MaxHandshakeTimeout {
		errs = append(errs, fmt.Errorf("--handshake-timeout must be between 0 (the default, %s) and %s, got %s", DefaultHandshakeTimeout, MaxHandshakeTimeout, l.HandshakeTimeout))
	}
	return errors.Join(errs...)
}

// Resolve returns the limits of each of a process's listeners, given how
// many it has and its file-descriptor limit (0: unknown or unlimited).
// Automatic caps share half of fdLimit evenly among the listeners (at most
// AutoMaxConnsCeiling each), so that a flood on every listener at once still
// leaves the process half of its descriptors; the per-address cap is a
// quarter of that (at most AutoMaxConnsPerIPCeiling). Explicit caps must
// leave ReservedFDs descriptors free.
func (l Limits) Resolve(listeners int, fdLimit uint64) (Limits, error) {
	if err := l.Validate(); err != nil {
		return Limits{}, err
	}
	listeners = max(listeners, 1)
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	limited := fdLimit > 0 && fdLimit < math.MaxInt32
	if l.MaxConns == 0 {
		l.MaxConns = AutoMaxConnsCeiling
		if limited {
			l.MaxConns = min(l.MaxConns, int(fdLimit/2)/listeners)
		}
		if l.MaxConns < 1 {
			return Limits{}, fmt.Errorf("the file-descriptor limit %d (ulimit -n) is too low for %d listeners: raise it", fdLimit, listeners)
		}
	} else if limited && uint64(l.MaxConns)*uint64(listeners)+ReservedFDs > fdLimit {
		return Limits{}, fmt.Errorf("--max-conns %d on %d listeners can hold %d file descriptors, but the process may open only %d (ulimit -n) and needs %d for its own work: lower --max-conns to at most %d or raise the limit",
			l.MaxConns, listeners, l.MaxConns*listeners, fdLimit, ReservedFDs, max(0, (int(fdLimit)-ReservedFDs)/listeners))
	}
	if l.MaxConnsPerIP == 0 {
		l.MaxConnsPerIP = max(1, min(AutoMaxConnsPerIPCeiling, l.MaxConns/4))
	} else if l.MaxConnsPerIP > l.MaxConns {
		return Limits{}, fmt.Errorf("--max-conns-per-ip %d is above the per-listener cap of %d (--max-conns, or automatic for %d listeners and ulimit -n %d): one address could hold the whole listener; lower it",
			l.MaxConnsPerIP, l.MaxConns, listeners, fdLimit)
	}
	return l, nil
}

// ForListeners is Resolve with the process's current file-descriptor limit.
func (l Limits) ForListeners(listeners int) (Limits, error) {
	return l.Resolve(listeners, FDLimit())
}

// FDLimit is the process's soft limit on open file descriptors (the Go
// runtime raises it to the hard limit at start), or 0 if unknown.
func FDLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
