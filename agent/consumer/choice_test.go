package consumer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func choiceGroup(provider string, free int32, score float64) api.NodeGroupView {
	return api.NodeGroupView{ID: api.NodeGroupID(provider, api.ChunkStandard), ProviderClusterID: provider, Type: api.ChunkStandard,
		MaxSize: free, PlacementMetric: &score, HasMetric: true}
}

// TestChoiceMasksToTheModelsPick: under a Choice view the local API's
// node groups grow only on the model's pick, the model is asked once,
// the API key comes from the Secret the ConsumerPolicy names, and the
// heartbeat reports the pick; without the Secret the fallback (the
// broker's best Weighted score) applies and says why.
func TestChoiceMasksToTheModelsPick(t *testing.T) {
	var calls atomic.Int32
	var auth atomic.Value
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(map[string]any{"response": `{"ranking": ["zurich", "milan"], "reason": "zurich runs on hydro"}`})
	}))
	defer model.Close()
	b := &stubBroker{view: api.NodeGroupListResponse{AppliedPlacement: api.PlacementChoice,
		NodeGroups: []api.NodeGroupView{choiceGroup("milan", 4, 0.2), choiceGroup("zurich", 2, 1.4)}}}
	policy := func(secret bool) []runtime.Object {
		pol := &fav1alpha1.ConsumerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "fa"}, Spec: fav1alpha1.ConsumerPolicySpec{
			Placement: fav1alpha1.Placement{Type: fav1alpha1.PlacementChoice},
			Intent:    "prioritise the greenest provider",
			Model: &fav1alpha1.ModelSettings{API: "Ollama", URL: model.URL, Name: "tiny",
				APIKeySecretRef: &fav1alpha1.SecretKeyRef{Name: "model-key"}},
		}}
		objs := []runtime.Object{pol}
		if secret {
			objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-key", Namespace: "fa"}, Data: map[string][]byte{"apiKey": []byte("k-123")}})
		}
		return objs
	}
	growable := func(v api.NodeGroupListResponse) []string {
		var out []string
		for _, g := range v.NodeGroups {
			if g.MaxSize > g.CurrentReserved {
				out = append(out, g.ProviderClusterID)
			}
		}
		return out
	}

	t.Run("the model's pick", func(t *testing.T) {
		calls.Store(0)
		a := newTestAgent(t, b, policy(true)...)
		ctx := context.Background()
		if _, err := a.heartbeatRequest(ctx); err != nil { // reads the ConsumerPolicy and its Secret
			t.Fatal(err)
		}
		for range 3 {
			v, err := a.NodeGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if g := growable(v); len(g) != 1 || g[0] != "zurich" {
				t.Fatalf("growable = %v, want [zurich]", g)
			}
		}
		if n := calls.Load(); n != 1 || auth.Load() != "Bearer k-123" {
			t.Errorf("model calls %d auth %q, want 1 call with the Secret's key", n, auth.Load())
		}
		d, ok := a.CurrentChoice()
		if !ok || d.Fallback || d.Reason != "zurich runs on hydro" || d.Intent != "prioritise the greenest provider" {
			t.Errorf("current decision = %+v", d)
		}
		req, err := a.heartbeatRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if req.ChosenProvider != "zurich" || req.Placement == nil || req.Placement.Type != api.PlacementChoice {
			t.Errorf("heartbeat chosenProvider %q placement %+v", req.ChosenProvider, req.Placement)
		}
	})
	t.Run("no Secret: fallback", func(t *testing.T) {
		calls.Store(0)
		a := newTestAgent(t, b, policy(false)...)
		ctx := context.Background()
		if _, err := a.heartbeatRequest(ctx); err != nil {
			t.Fatal(err)
		}
		v, err := a.NodeGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g := growable(v); len(g) != 1 || g[0] != "milan" {
			t.Fatalf("growable = %v, want the fallback's [milan]", g)
		}
		d, _ := a.CurrentChoice()
		if !d.Fallback || !strings.Contains(d.Why, "Secret fa/model-key") || calls.Load() != 0 {
			t.Errorf("decision = %+v after %d calls; want a fallback naming the Secret, no call", d, calls.Load())
		}
	})
}
