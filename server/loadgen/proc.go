package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPU is the user+system CPU time of process pid from /proc (0 for
// pid ≤ 0).
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("broker process %d: %w (is --broker-pid the broker's pid on this machine?)", pid, err)
	}
	// The command name (field 2) may hold spaces: fields are counted after
	// its closing parenthesis; utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procRSS is the resident set of pid in bytes (VmRSS).
func procRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

type rssStats struct {
	n        int
	sum, max int64
}

func (r *rssStats) sample(pid int) {
	if pid <= 0 {
		return
	}
	if v, ok := procRSS(pid); ok {
		r.n++
		r.sum += v
		r.max = max(r.max, v)
	}
}

func (r *rssStats) maxMiB() float64 { return float64(r.max) / (1 << 20) }
func (r *rssStats) meanMiB() float64 {
	if r.n == 0 {
		return 0
	}
	return float64(r.sum) / float64(r.n) / (1 << 20)
}

// loadAverage is the first three fields of /proc/loadavg ("" if unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
