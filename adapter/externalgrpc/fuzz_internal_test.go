package externalgrpc

import (
	"strings"
	"testing"
)

// FuzzParseProviderID: node providerIDs come from the Cluster Autoscaler
// (any node of the cluster); a parsed one names a provider and a
// reservation exactly (it round-trips through ProviderID) and anything else
// is "not ours".
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"liqo://p1/res-1", "liqo://p1/", "liqo:///res-1", "aws:///eu-west-1a/i-0123", "liqo://../p1/x", "liqo://p1/a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, r, ok := parseProviderID(id)
		if !ok {
			return
		}
		if p == "" || r == "" || strings.Contains(p, "/") || ProviderID(p, r) != id {
			t.Fatalf("parseProviderID(%q) = %q, %q: does not round-trip", id, p, r)
		}
	})
}
