package rest

import (
	"bytes"
	"errors"
	"testing"
)

func TestReportCache(t *testing.T) {
	var c reportCache[string]
	calls := 0
	decode := func(b []byte) (string, error) {
		calls++
		if bytes.HasPrefix(b, []byte("bad")) {
			return "", errors.New("bad body")
		}
		return string(b), nil
	}
	big := bytes.Repeat([]byte("x"), MaxCachedReport+1)
	steps := []struct {
		cn, body  string
		want      string
		wantErr   bool
		wantCalls int // decodes so far
	}{
		{"a", "one", "one", false, 1},
		{"a", "one", "one", false, 1}, // a repeat: not decoded again
		{"b", "one", "one", false, 2}, // per caller
		{"a", "two", "two", false, 3}, // a change
		{"a", "two", "two", false, 3},
		{"a", "bad", "", true, 4}, // an error is not kept...
		{"a", "bad", "", true, 5}, // ...and decoded again
		{"a", "two", "two", false, 5},
		{"a", string(big), string(big), false, 6}, // too large to keep
		{"a", string(big), string(big), false, 7},
	}
	for i, st := range steps {
		got, err := c.decode(st.cn, []byte(st.body), decode)
		if (err != nil) != st.wantErr || got != st.want || calls != st.wantCalls {
			t.Fatalf("step %d (%s %.10q): got %.10q, err %v, %d decodes; want %.10q, error %v, %d decodes",
				i, st.cn, st.body, got, err, calls, st.want, st.wantErr, st.wantCalls)
		}
	}
	// The byte budget: the cache starts over instead of growing past it.
	body := bytes.Repeat([]byte("y"), MaxCachedReport)
	for i := range 2 * ReportCacheBytes / MaxCachedReport {
		if _, err := c.decode(string(rune('A'+i%26))+string(rune(i)), body, decode); err != nil {
			t.Fatal(err)
		}
		if c.bytes > ReportCacheBytes {
			t.Fatalf("%d bytes kept, over the budget of %d", c.bytes, ReportCacheBytes)
		}
	}
}
