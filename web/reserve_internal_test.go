package web

import (
	"strings"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// The manual reservation form: per provider only the chunk types it offers.
func TestParseReservation(t *testing.T) {
	offers := map[string]map[api.ChunkType]bool{"paris": {api.ChunkStandard: true}, "milan": {api.ChunkStandard: true, api.ChunkGPU: true}}
	cases := []struct {
		provider, typ, count string
		field, msg           string
		want                 int32
	}{
		{"paris", "standard", "2", "", "", 2},
		{"milan", "gpu", "64", "", "", 64},
		{"paris", "gpu", "1", "chunk_type", "paris offers no gpu chunks", 0},
		{"paris", "tpu", "1", "chunk_type", "Chunk type: choose one the providers offer (gpu, standard)", 0},
		{"rome", "standard", "1", "provider", "Provider: choose one of the providers the broker offers", 0},
		{"paris", "standard", "65", "count", "Chunks: a whole number from 1 to 64", 0},
		{"paris", "standard", "1.5", "count", "Chunks: a whole number from 1 to 64", 0},
	}
	for _, tc := range cases {
		spec, errs := parseReservation(tc.provider, tc.typ, tc.count, offers)
		if tc.field == "" {
			if len(errs) != 0 || spec.ChunkCount != tc.want || spec.ProviderClusterID != tc.provider || string(spec.ChunkType) != tc.typ {
				t.Errorf("%s/%s/%s: %+v %v", tc.provider, tc.typ, tc.count, spec, errs)
			}
			continue
		}
		if errs[tc.field] != tc.msg {
			t.Errorf("%s/%s/%s: %s error %q, want %q (all: %v)", tc.provider, tc.typ, tc.count, tc.field, errs[tc.field], tc.msg, errs)
		}
	}
	// The form lists only offered types, and what each provider offers.
	f := reserveForm(ConsumerStatus{NodeGroups: []api.NodeGroupView{
		{ProviderClusterID: "paris", Type: api.ChunkStandard}, {ProviderClusterID: "milan", Type: api.ChunkGPU},
	}}, "", "", "1")
	var types, provs []string
	for _, o := range f.ChunkTypes {
		types = append(types, o.Value)
	}
	for _, o := range f.Providers[1:] {
		provs = append(provs, o.Label)
	}
	if strings.Join(types, ",") != "gpu,standard" || strings.Join(provs, ",") != "milan (gpu),paris (standard)" {
		t.Errorf("form offers types %v and providers %v", types, provs)
	}
}
