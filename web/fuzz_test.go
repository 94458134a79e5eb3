package web

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/api/apitest"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// getter serves form fields from a map.
func getter(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// sharingFields is what a browser submits for a rendered sharing form.
func sharingFields(f views.SharingForm) map[string]string {
	m := map[string]string{"allowed": f.Allowed, "denied": f.Denied, "quota": f.Quota}
	if f.Renewable {
		m["renewable"] = "on"
	}
	for _, p := range f.Prices {
		m[p.Name] = p.Value
	}
	for _, c := range f.Caps {
		for _, o := range c.Modes {
			if o.Selected {
				m[c.ModeName] = o.Value
			}
		}
		m[c.ValueName] = c.Value
	}
	return m
}

// FuzzSharingForm: the provider console's form parser never panics; what
// it accepts the broker accepts (advertised with these prices, caps and
// rules) and holds only finite values within the limits; rendering the
// accepted configuration and submitting it again gives the same
// configuration.
func FuzzSharingForm(f *testing.F) {
	f.Add("0.02", "0.004", "", "percent", "50", "fixed", "8Gi", "rome, naples", "venice", "3")
	f.Add("9e307", "NaN", "+Inf", "percent", "-5", "fixed", "1e30", "../p1", "a\x00b", "-1")
	f.Fuzz(func(t *testing.T, priceCPU, priceMem, priceGPU, modeCPU, capCPU, modeMem, capMem, allowed, denied, quota string) {
		form := map[string]string{
			"price_cpu": priceCPU, "price_memory": priceMem, "price_gpu": priceGPU,
			"cap_mode_cpu": modeCPU, "cap_value_cpu": capCPU, "cap_mode_memory": modeMem, "cap_value_memory": capMem,
			"allowed": allowed, "denied": denied, "quota": quota,
		}
		cfg, errs := parseSharing(getter(form))
		if len(errs) > 0 {
			return
		}
		if err := apitest.WithinLimits(cfg); err != nil {
			t.Fatalf("accepted %v: %v", form, err)
		}
		sh := cfg.Sharing
		ad := api.AdvertisementRequest{
			ClusterID: "p1", LiqoClusterID: "liqo-p1", Resources: corev1.ResourceList{corev1.ResourceCPU: api.MaxQuantityValue()},
			UnitPrices: cfg.UnitPrices, CapacityScalePercent: cfg.CapacityScalePercent, CapacityFixed: cfg.CapacityFixed, Sharing: &sh,
		}
		if err := ad.Validate(); err != nil {
			t.Fatalf("accepted %v, which the broker refuses: %v", form, err)
		}
		back, errs := parseSharing(getter(sharingFields(sharingFormFromConfig(cfg))))
		if len(errs) > 0 {
			t.Fatalf("the rendered form of %+v is refused: %v", cfg, errs)
		}
		if !sameSharing(cfg, back) {
			t.Fatalf("round trip changed %+v into %+v", cfg, back)
		}
	})
}

func sameSharing(a, b SharingConfig) bool {
	sameList := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, q := range x {
			if p, ok := y[k]; !ok || p.Cmp(q) != 0 {
				return false
			}
		}
		return true
	}
	return sameList(a.UnitPrices, b.UnitPrices) && sameList(a.CapacityFixed, b.CapacityFixed) &&
		reflect.DeepEqual(a.CapacityScalePercent, b.CapacityScalePercent) && a.Renewable == b.Renewable &&
		reflect.DeepEqual(a.Sharing, b.Sharing)
}

// FuzzPolicyForm: the consumer console's policy parser never panics; an
// accepted policy passes the broker's heartbeat validation, has finite
// weights within [0, api.MaxWeight], and the form rendered from it is
// accepted again as the same policy.
func FuzzPolicyForm(f *testing.F) {
	f.Add("Weighted", "1", "0.5", "", "2")
	f.Add("Weighted", "NaN", "+Inf", "9e307", "-1")
	f.Add("Price", "", "", "", "")
	f.Fuzz(func(t *testing.T, policy, wPrice, wCarbon, wDistance, wFree string) {
		form := map[string]string{"policy": policy, "w_price": wPrice, "w_carbon": wCarbon, "w_distance": wDistance, "w_free": wFree}
		p, _, errs := parsePolicy(getter(form))
		if len(errs) > 0 {
			return
		}
		hb := api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1", Placement: &p}
		if err := hb.Validate(); err != nil {
			t.Fatalf("accepted %v, which the broker refuses: %v", form, err)
		}
		if err := apitest.WithinLimits(p); err != nil {
			t.Fatalf("accepted %v: %v", form, err)
		}
		if w := p.Weights; w != nil && w.Price+w.Carbon+w.Distance+w.FreeCapacity <= 0 {
			t.Fatalf("accepted a Weighted policy without weights: %v", form)
		}
		rendered := policyForm(p)
		again := map[string]string{"policy": string(p.Type)}
		for _, w := range rendered.Weights {
			again[w.Name] = w.Value
		}
		back, _, errs := parsePolicy(getter(again))
		if len(errs) > 0 || !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip of %+v: %+v %v", p, back, errs)
		}
	})
}

// FuzzReservationForm: the manual reservation and release parsers never
// panic; an accepted reservation names an offered provider and a real chunk
// type and passes the broker's rules (one reservation per chunk).
func FuzzReservationForm(f *testing.F) {
	f.Add("paris", "standard", "1", "res-1")
	f.Add("../p1", "tpu", "1e30", "../x")
	f.Fuzz(func(t *testing.T, provider, chunkType, count, releaseID string) {
		offered := map[string]map[api.ChunkType]bool{"paris": {api.ChunkStandard: true}, "milan": {api.ChunkStandard: true, api.ChunkGPU: true}}
		spec, errs := parseReservation(provider, chunkType, count, offered)
		if len(errs) == 0 {
			if !offered[spec.ProviderClusterID][spec.ChunkType] || spec.ChunkCount < 1 || spec.ChunkCount > 64 {
				t.Fatalf("accepted %+v", spec)
			}
			req := api.ReservationRequest{ProviderClusterID: spec.ProviderClusterID, ChunkCount: 1, ChunkType: spec.ChunkType,
				NodeGroupID: api.NodeGroupID(spec.ProviderClusterID, spec.ChunkType)}
			if err := req.Validate(); err != nil {
				t.Fatalf("accepted %+v, which the broker refuses: %v", spec, err)
			}
		}
		if fe := api.CheckReservationID("id", releaseID); fe == nil && (releaseID == "" || len(releaseID) > 253) {
			t.Fatalf("release id %q accepted", releaseID)
		}
	})
}
