package consumer

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/choice"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// DefaultAPIKeySecretKey is the data key of the model's API key Secret
// when the ConsumerPolicy's apiKeySecretRef names none.
const DefaultAPIKeySecretKey = "apiKey"

// choiceSettings are the Choice inputs read with the ConsumerPolicy.
type choiceSettings struct {
	intent string
	ep     choice.Endpoint
	err    error // why the endpoint or intent cannot be used
}

// noteChoice resolves the Choice settings of the ConsumerPolicy (its
// intent and model, over the agent's --model-* defaults; the API key from
// its Secret) for the next selections. A Secret that cannot be read, an
// endpoint or an intent that breaks the rules makes the model unusable:
// the fallback applies, and its decision says why.
func (a *Agent) noteChoice(ctx context.Context, spec *fav1alpha1.ConsumerPolicySpec) {
	cs := choiceSettings{ep: a.cfg.Model}
	var keyErr error
	if spec != nil {
		cs.intent = spec.Intent
		if m := spec.Model; m != nil {
			if m.API != "" {
				cs.ep.API = choice.API(m.API)
			}
			if m.URL != "" {
				cs.ep.URL = m.URL
			}
			if m.Name != "" {
				cs.ep.Model = m.Name
			}
			if m.TimeoutSeconds > 0 {
				cs.ep.Timeout = time.Duration(m.TimeoutSeconds) * time.Second
			}
			if ref := m.APIKeySecretRef; ref != nil {
				cs.ep.APIKey, keyErr = a.apiKey(ctx, ref)
			}
		}
	}
	switch {
	case keyErr != nil:
		cs.err = keyErr
	case choice.CheckIntent(cs.intent) != nil:
		cs.err = choice.CheckIntent(cs.intent)
	default:
		cs.err = cs.ep.Validate()
	}
	a.mu.Lock()
	a.choiceIn = cs
	a.mu.Unlock()
}

// apiKey reads the model's API key from the Secret ref names in the
// agent's namespace. The error names the Secret and key, never the value.
func (a *Agent) apiKey(ctx context.Context, ref *fav1alpha1.SecretKeyRef) (string, error) {
	key := ref.Key
	if key == "" {
		key = DefaultAPIKeySecretKey
	}
	var s corev1.Secret
	if err := a.cfg.Client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: ref.Name}, &s); err != nil {
		return "", fmt.Errorf("reading the model's API key from Secret %s/%s: %w", a.cfg.Namespace, ref.Name, err)
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("the model's API key Secret %s/%s has no key %q", a.cfg.Namespace, ref.Name, key)
	}
	return string(v), nil
}

// choose applies the Choice selector to a Choice view: it measures RTTs
// to the listed providers (when a Prober is set), lets the selector pick
// one provider per chunk type and masks the view to those picks, so the
// Cluster Autoscaler and manual reservations grow there. The pick of the
// standard chunk type (else the first) is reported to the broker as
// chosenProvider.
func (a *Agent) choose(ctx context.Context, view *api.NodeGroupListResponse) {
	var (
		rtts  map[string]float64
		moved bool
	)
	if a.cfg.Prober != nil {
		rtts, moved = a.measure(ctx, view)
	}
	a.mu.Lock()
	cs := a.choiceIn
	var loc *choice.Location
	if a.loc != nil {
		loc = &choice.Location{City: a.loc.City, Latitude: a.loc.Latitude, Longitude: a.loc.Longitude}
	}
	if rtts == nil {
		rtts = maps.Clone(a.rtts)
	}
	a.mu.Unlock()
	d := a.choice.Select(ctx, choice.Input{Intent: cs.intent, Location: loc, View: *view, RTTs: rtts, Endpoint: cs.ep, Unusable: cs.err})
	choice.Mask(view, d)
	chosen := ""
	if p, ok := d.Chosen(api.ChunkStandard); ok {
		chosen = p.Provider
	} else if len(d.Picks) > 0 {
		chosen = d.Picks[0].Provider
	}
	a.mu.Lock()
	changed := a.chosen != chosen || a.choiceAt != d.At && !d.Cached
	beat := a.chosen != chosen || moved
	a.chosen = chosen
	if changed {
		a.choiceAt = d.At
	}
	a.mu.Unlock()
	if beat {
		a.BeatNow()
	}
	if changed {
		a.changes.Notify()
	}
}

// Decisions is the Choice selector's audit log, newest first.
func (a *Agent) Decisions() []choice.Decision { return a.choice.Decisions() }

// CurrentChoice is the Choice selector's latest decision (false before the
// first).
func (a *Agent) CurrentChoice() (choice.Decision, bool) { return a.choice.Current() }

// Intent is the intent of the ConsumerPolicy as last read.
func (a *Agent) Intent() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.choiceIn.intent
}
