package memlimit

import (
	"math"
	"strings"
	"testing"
	"testing/fstest"
)

func TestResolve(t *testing.T) {
	v2 := func(s string) fstest.MapFS { return fstest.MapFS{cgroupV2File: {Data: []byte(s)}} }
	v1 := func(s string) fstest.MapFS { return fstest.MapFS{cgroupV1File: {Data: []byte(s)}} }
	noEnv := func(string) string { return "" }
	share := func(b uint64) int64 { return int64(float64(b) * ContainerShare) }
	for _, tc := range []struct {
		name    string
		flag    string
		root    fstest.MapFS
		env     func(string) string
		want    int64
		source  string
		wantErr string
	}{
		{name: "flag", flag: "512Mi", root: v2("1073741824\n"), env: noEnv, want: 512 << 20, source: "flag"},
		{name: "flag none", flag: "none", root: v2("1073741824\n"), env: noEnv, want: math.MaxInt64, source: "flag (none)"},
		{name: "cgroup v2", root: v2("1073741824\n"), env: noEnv, want: share(1 << 30), source: "cgroup"},
		{name: "cgroup v2 unlimited", root: v2("max\n"), env: noEnv, want: math.MaxInt64, source: "none"},
		{name: "cgroup v1", root: v1("2147483648"), env: noEnv, want: share(2 << 30), source: "cgroup"},
		{name: "cgroup v1 unlimited", root: v1("9223372036854771712"), env: noEnv, want: math.MaxInt64, source: "none"},
		{name: "no cgroup", root: fstest.MapFS{}, env: noEnv, want: math.MaxInt64, source: "none"},
		{name: "GOMEMLIMIT wins over the cgroup", root: v2("1073741824"), env: func(k string) string {
			if k == "GOMEMLIMIT" {
				return "300MiB"
			}
			return ""
		}, source: "GOMEMLIMIT"},
		{name: "bad cgroup file", root: v2("lots"), env: noEnv, wantErr: `is "lots", not a number or max: set --memory-limit`},
		{name: "too small", flag: "1Mi", root: fstest.MapFS{}, env: noEnv, wantErr: "at least 32Mi"},
		{name: "not a quantity", flag: "half", root: fstest.MapFS{}, env: noEnv, wantErr: `got "half"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Options{Limit: tc.flag}.Resolve(tc.root, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Source != tc.source {
				t.Errorf("source = %q, want %q", d.Source, tc.source)
			}
			if tc.source != "GOMEMLIMIT" && d.Limit != tc.want {
				t.Errorf("limit = %d, want %d", d.Limit, tc.want)
			}
		})
	}
}
