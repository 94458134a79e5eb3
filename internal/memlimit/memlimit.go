// Package memlimit sets the Go runtime's soft memory limit of a long-running
// process (debug.SetMemoryLimit, the GOMEMLIMIT of the runtime) from its
// --memory-limit flag or, by default, from the memory limit of the container
// it runs in. Near the limit the garbage collector runs more often instead of
// letting the heap double past its live size, so a broker holding
// thousands of agents' connections stays inside its pod's limit rather than
// being OOM-killed, at the cost of some CPU.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ContainerShare is the part of the container's memory limit the automatic
// setting gives the Go runtime; the rest is left to what the runtime does
// not count (the binary's text, kernel buffers charged to the cgroup).
const ContainerShare = 0.9

// Min is the lowest accepted explicit limit: below it the collector would
// run continuously.
const Min = 32 << 20

// Options are the --memory-limit flag.
type Options struct {
	// Limit is the flag's text: "" (automatic), "none", or a quantity
	// such as 512Mi.
	Limit string
}

// AddFlags binds --memory-limit to o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Limit, "memory-limit", "", fmt.Sprintf(
		"soft memory limit of the Go runtime, e.g. 512Mi: the garbage collector works harder near it; empty: GOMEMLIMIT when set, else %.0f%% of the container's memory limit (cgroup), else none; none: no limit", ContainerShare*100))
}

// Validate checks the flag's text.
func (o Options) Validate() error {
	_, _, err := o.explicit()
	return err
}

// explicit parses an explicit setting: set is false for "" (automatic).
func (o Options) explicit() (limit int64, set bool, err error) {
	switch s := strings.TrimSpace(o.Limit); s {
	case "":
		return 0, false, nil
	case "none":
		return math.MaxInt64, true, nil
	default:
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Value() < Min {
			return 0, false, fmt.Errorf("--memory-limit must be a quantity of at least %dMi such as 512Mi, or none, or empty (automatic), got %q", Min>>20, o.Limit)
		}
		return q.Value(), true, nil
	}
}

// Decision is the limit chosen and why (for the start log).
type Decision struct {
	// Limit is the bytes given to debug.SetMemoryLimit (math.MaxInt64:
	// none).
	Limit int64
	// Source says where it came from: flag, GOMEMLIMIT, cgroup or none.
	Source string
}

// Resolve chooses the limit: the flag, else GOMEMLIMIT (already applied
// by the runtime: left alone), else ContainerShare of the cgroup limit
// read from root (the host's "/"), else none.
func (o Options) Resolve(root fs.FS, getenv func(string) string) (Decision, error) {
	lim, set, err := o.explicit()
	if err != nil {
		return Decision{}, err
	}
	switch {
	case set && lim == math.MaxInt64:
		return Decision{Limit: lim, Source: "flag (none)"}, nil
	case set:
		return Decision{Limit: lim, Source: "flag"}, nil
	case getenv("GOMEMLIMIT") != "":
		return Decision{Limit: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	if c, ok, err := CgroupLimit(root); err != nil {
		return Decision{}, err
	} else if ok {
		return Decision{Limit: int64(float64(c) * ContainerShare), Source: "cgroup"}, nil
	}
	return Decision{Limit: math.MaxInt64, Source: "none"}, nil
}

// Apply resolves the limit from the host's files and environment and sets
// it.
func (o Options) Apply() (Decision, error) {
	d, err := o.Resolve(os.DirFS("/"), os.Getenv)
	if err != nil {
		return Decision{}, err
	}
	debug.SetMemoryLimit(d.Limit)
	return d, nil
}

// The files that hold a container's memory limit, cgroup v2 and v1 (paths
// relative to "/"; inside a container's cgroup namespace they are the
// container's own).
const (
	cgroupV2File = "sys/fs/cgroup/memory.max"
	cgroupV1File = "sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// unlimitedV1 is at or above what cgroup v1 reports for "no limit" (the
// largest page-aligned int64).
const unlimitedV1 = math.MaxInt64 &^ (1<<12 - 1)

// CgroupLimit reads the memory limit of the cgroup from root; ok is false
// when there is none ("max", cgroup v1's page-aligned maximum, or no
// file).
func CgroupLimit(root fs.FS) (limit uint64, ok bool, err error) {
	for _, name := range []string{cgroupV2File, cgroupV1File} {
		b, err := fs.ReadFile(root, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading the container's memory limit from /%s: %w", name, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false, nil
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("the container's memory limit in /%s is %q, not a number or max: set --memory-limit", name, s)
		}
		if v >= unlimitedV1 {
			return 0, false, nil
		}
		return v, true, nil
	}
	return 0, false, nil
}
