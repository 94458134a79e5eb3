package api

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// checkRefusal: a refusal names a field, stays short and is valid UTF-8
// whatever the input held (NUL bytes, invalid UTF-8, a megabyte).
func checkRefusal(t *testing.T, fe *FieldError) {
	t.Helper()
	msg := fe.Error()
	if fe.Field == "" || fe.Want == "" || !strings.Contains(msg, ": must be ") || !utf8.ValidString(msg) || len(msg) > 600 {
		t.Fatalf("refusal %q (%d bytes) must name the field, the value (short, valid UTF-8) and the range", msg, len(msg))
	}
	if e := fe.APIError(); e.Code != CodeInvalidRequest || e.Details["field"] != fe.Field {
		t.Fatalf("API error %+v", e)
	}
}

// FuzzCheckNumbers: every number rule accepts only finite values inside its
// documented range.
func FuzzCheckNumbers(f *testing.F) {
	for _, v := range []float64{0, 1, 9e307, 1e30, math.NaN(), math.Inf(1), math.Inf(-1), -1, 1000, 1000.0001, 90, -180, 100000, 1e6} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		for _, r := range []struct {
			check  func(string, float64) *FieldError
			lo, hi float64
		}{
			{CheckCarbon, 0, MaxCarbonIntensity},
			{CheckWeight, 0, MaxWeight},
			{CheckLatency, 0, MaxLatencyMillis},
			{CheckLatitude, -90, 90},
			{CheckLongitude, -180, 180},
		} {
			fe := r.check("field", v)
			inRange := !math.IsNaN(v) && !math.IsInf(v, 0) && v >= r.lo && v <= r.hi
			if (fe == nil) != inRange {
				t.Fatalf("value %v in [%v, %v]: %v, refusal %v", v, r.lo, r.hi, inRange, fe)
			}
			if fe != nil {
				checkRefusal(t, fe)
			}
		}
		pct := int64(v)
		if fe := CheckPercent("p", pct); (fe == nil) != (pct >= 0 && pct <= MaxPercent) {
			t.Fatalf("percent %d: %v", pct, fe)
		}
	})
}

func isLabel(s string, dots bool, maxLen int) bool {
	if s == "" || len(s) > maxLen || s[0] == '-' || s[len(s)-1] == '-' || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || dots && c == '.') {
			return false
		}
	}
	return true
}

// FuzzCheckStrings: ids, names and texts accepted by the rules are what
// Kubernetes and Liqo can use (independent character checks) and never
// carry NUL bytes, invalid UTF-8, control characters or path elements.
func FuzzCheckStrings(f *testing.F) {
	for _, s := range []string{"provider-1", "../x", "../p1", "", "a.b", "liqo\x00id", "\xff\xfe", strings.Repeat("a", 64), "nvidia.com/gpu", "São Paulo", "res-1", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range []struct {
			name  string
			fe    *FieldError
			valid bool
		}{
			{"cluster id", CheckClusterID("id", s), isLabel(s, false, 63)},
			{"namespace", CheckNamespace("ns", s), isLabel(s, false, 63)},
			{"reservation id", CheckReservationID("id", s), false},
			{"resource name", CheckResourceName("r", corev1.ResourceName(s)), false},
			{"text", CheckText("t", s), false},
		} {
			if r.fe != nil {
				checkRefusal(t, r.fe)
			}
			switch r.name {
			case "cluster id", "namespace":
				if (r.fe == nil) != r.valid {
					t.Fatalf("%s %q: refusal %v, want valid=%v", r.name, s, r.fe, r.valid)
				}
			case "reservation id":
				if r.fe == nil && (len(s) > 253 || strings.Contains(s, "..") || strings.Contains(s, "/") || !isLabel(s, true, 253)) {
					t.Fatalf("reservation id %q accepted", s)
				}
			case "resource name":
				if r.fe == nil && (strings.Count(s, "/") > 1 || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsSpace) || strings.ContainsFunc(s, unicode.IsControl)) {
					t.Fatalf("resource name %q accepted", s)
				}
				for _, part := range strings.Split(s, "/") {
					if r.fe == nil && (part == "" || part == "." || part == "..") {
						t.Fatalf("resource name %q accepted: it holds a path element %q", s, part)
					}
				}
			case "text":
				if r.fe == nil && (len(s) > MaxTextLength || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl)) {
					t.Fatalf("text %q accepted", s)
				}
			}
		}
		if fe := CheckOptionalClusterID("id", s); (fe == nil) != (s == "" || isLabel(s, false, 63)) {
			t.Fatalf("optional cluster id %q: %v", s, fe)
		}
	})
}

// FuzzCheckQuantity: accepted quantities and prices lie inside their
// ranges, and an accepted price times an accepted amount stays a finite
// float64 (so a cost can never become ±Inf).
func FuzzCheckQuantity(f *testing.F) {
	for _, s := range []string{"0", "2", "4Gi", "1E", "1Ei", "9e307", "1e30", "1e100000", "-1", "1M", "1000000.000000001", "500m", "1n"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, amount, price string) {
		q, fe := ParseQuantity("q", amount)
		if fe != nil {
			checkRefusal(t, fe)
			return
		}
		p, fe := ParseQuantity("p", price)
		if fe != nil {
			checkRefusal(t, fe)
			return
		}
		// Exact conversions: AsApproximateFloat64 is NaN for 0e800.
		qf, _ := strconv.ParseFloat(q.AsDec().String(), 64)
		pf, _ := strconv.ParseFloat(p.AsDec().String(), 64)
		feQ, feP := CheckQuantity("q", q), CheckUnitPrice("p", p)
		if feQ == nil && (q.Sign() < 0 || qf > MaxQuantity || math.IsInf(qf, 0)) {
			t.Fatalf("quantity %s accepted", q.String())
		}
		if feP == nil && (p.Sign() < 0 || pf > MaxUnitPrice) {
			t.Fatalf("price %s accepted", p.String())
		}
		for _, fe := range []*FieldError{feQ, feP} {
			if fe != nil {
				checkRefusal(t, fe)
			}
		}
		if feQ == nil && feP == nil {
			if cost := qf * pf * 64; math.IsInf(cost, 0) || math.IsNaN(cost) {
				t.Fatalf("%s × %s overflows", q.String(), p.String())
			}
		}
	})
}

// FuzzParseNodeGroupID: a parsed node-group id names its provider and type
// exactly (it round-trips through NodeGroupID).
func FuzzParseNodeGroupID(f *testing.F) {
	for _, s := range []string{"ng-p1-standard", "ng-a-b-gpu", "ng--gpu", "ng-p1-tpu", "ng-", "../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, typ, ok := ParseNodeGroupID(id)
		if !ok {
			return
		}
		if p == "" || NodeGroupID(p, typ) != id {
			t.Fatalf("ParseNodeGroupID(%q) = %q, %q: does not round-trip", id, p, typ)
		}
	})
}
