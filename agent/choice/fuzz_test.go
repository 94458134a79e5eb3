package choice

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// textDoer answers every model call with one Ollama envelope around text.
type textDoer string

func (d textDoer) Do(*http.Request) (*http.Response, error) {
	b, _ := json.Marshal(map[string]any{"response": string(d), "done": true})
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(b)), Header: http.Header{}}, nil
}

// FuzzAnswer feeds any text to the parser and, as the model's answer, to
// the selector: whatever the text, the pick is a provider the broker
// listed with room for the type, the mask only lowers maxSizes, and at
// most one group per type stays growable. Seeds: testdata/fuzz/FuzzAnswer.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"ranking": ["a", "b"], "reason": "a is green"}`,
		`{"ranking": ["full", "zz"]}`,
		`{"ranking": []}`,
		"```json\n{\"ranking\": [\"a\"]}\n```",
		`{"ranking": ["a"], "ranking": ["b"]}`,
		`{"ranking": ["a\u0000"]}`,
		`[{"ranking": ["a"]}]`,
	} {
		f.Add(s)
	}
	// b (gpu and standard room), a (standard room), full (held, no room).
	gpu := group("b", 2, 0.3)
	gpu.ID, gpu.Type = api.NodeGroupID("b", api.ChunkGPU), api.ChunkGPU
	full := group("full", 0, 0)
	full.MaxSize, full.CurrentReserved = 2, 2
	base := view(group("a", 3, 1), gpu, group("b", 1, 2), full)
	f.Fuzz(func(t *testing.T, text string) {
		if a, err := ParseAnswer(text); err == nil {
			if len(a.Ranking) == 0 || len(a.Ranking) > MaxRankingEntries || len([]rune(a.Reason)) > MaxReasonRunes+1 {
				t.Fatalf("parser accepted %+v", a)
			}
		}
		s, err := New(Config{HTTP: textDoer(text)})
		if err != nil {
			t.Fatal(err)
		}
		v := base
		v.NodeGroups = append([]api.NodeGroupView(nil), base.NodeGroups...)
		d := s.Select(context.Background(), Input{View: v, Endpoint: Endpoint{API: APIOllama, URL: "http://model.invalid", Model: "m"}})
		room := map[string]bool{}
		for _, g := range base.NodeGroups {
			if g.MaxSize > g.CurrentReserved {
				room[g.ID] = true
			}
		}
		for _, p := range d.Picks {
			if !room[api.NodeGroupID(p.Provider, p.Type)] {
				t.Fatalf("picked %+v, which has no room in the broker's view", p)
			}
		}
		Mask(&v, d)
		growing := map[api.ChunkType]int{}
		for i, g := range v.NodeGroups {
			if g.MaxSize > base.NodeGroups[i].MaxSize {
				t.Fatalf("the mask raised %s to %d", g.ID, g.MaxSize)
			}
			if g.MaxSize > g.CurrentReserved {
				growing[g.Type]++
			}
		}
		for ty, n := range growing {
			if n > 1 {
				t.Fatalf("%d groups of type %s growable after the mask", n, ty)
			}
		}
	})
}
