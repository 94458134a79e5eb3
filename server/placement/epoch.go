package placement

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// Epoch changes whenever anything the Index's decisions read changes: a
// provider's advertisement or availability, a consumer's policy or
// location, any usage. Re-sending what is already known (the periodic
// advertisement and heartbeat of an unchanged cluster) leaves it alone, so
// a cache of decisions or explanations keyed by Epoch stays valid across
// them. It never goes back.
func (ix *Index) Epoch() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.epoch
}

// sameProvider reports whether a and b carry the same advertisement and
// availability. False negatives only cost a cache refresh; quantities are
// compared by value (their cached string forms may differ).
func sameProvider(a, b Provider) bool {
	if !sameResources(a.Resources, b.Resources) || !sameResources(a.UnitPrices, b.UnitPrices) {
		return false
	}
	a.Resources, a.UnitPrices, b.Resources, b.UnitPrices = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, qa := range a {
		qb, ok := b[k]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// sameConsumer reports whether a and b carry the same heartbeat state.
func sameConsumer(a, b Consumer) bool { return reflect.DeepEqual(a, b) }
