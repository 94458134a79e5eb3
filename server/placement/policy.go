package placement

import (
	"math"
	"math/big"
	"slices"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// MayBorrow reports whether consumerID may borrow from a provider with
// sharing rules s: nil rules allow everyone, a denial wins over an
// allowance, and an empty allow list allows everyone not denied.
func MayBorrow(s *api.Sharing, consumerID string) bool {
	return sharingVerdict(s, consumerID) == usable
}

// sharingVerdict is MayBorrow's rule with the reason: usable, denied (a
// denial wins) or notAllowed (outside a non-empty allow list).
func sharingVerdict(s *api.Sharing, consumerID string) verdict {
	switch {
	case s == nil:
		return usable
	case slices.Contains(s.DeniedConsumers, consumerID):
		return denied
	case len(s.AllowedConsumers) == 0 || slices.Contains(s.AllowedConsumers, consumerID):
		return usable
	}
	return notAllowed
}

// Quota returns the most live chunks one consumer may hold on a provider
// per chunk type under sharing rules s; 0 means unlimited.
func Quota(s *api.Sharing) int32 {
	if s == nil || s.MaxChunksPerConsumer < 0 {
		return 0
	}
	return s.MaxChunksPerConsumer
}

// NormalizePolicy returns the policy the broker applies for a heartbeated
// placement type and whether the name was known. The empty type is the
// default, Standard (known); an unknown name is applied as Standard and
// reported as unknown so the caller can warn. The reference's
// ConsumerChoice is applied as Choice.
func NormalizePolicy(t api.PlacementType) (applied api.PlacementType, known bool) {
	switch t {
	case "":
		return api.PlacementStandard, true
	case api.PlacementConsumerChoice:
		return api.PlacementChoice, true
	case api.PlacementStandard, api.PlacementPrice, api.PlacementEco, api.PlacementLatency, api.PlacementWeighted, api.PlacementChoice, api.PlacementRandom:
		return t, true
	}
	return api.PlacementStandard, false
}

// ecoWeights are the Eco policy's forward weights, current hour first.
var ecoWeights = [...]float64{0.40, 0.25, 0.15, 0.10, 0.06, 0.04}

// WeightedCarbon is the Eco metric in gCO2eq/kWh: the first min(6, len)
// forecast values weighted 0.40, 0.25, 0.15, 0.10, 0.06, 0.04 and divided by
// the sum of the weights used; with no forecast, the current intensity. ok
// is false when there is neither, or when a value used is outside
// api.CheckCarbon's range (negative, NaN, infinite or above
// api.MaxCarbonIntensity: the provider then has no carbon metric).
func WeightedCarbon(forecast []float64, current *float64) (float64, bool) {
	if len(forecast) == 0 {
		if current == nil || !validCarbon(*current) {
			return 0, false
		}
		return *current, true
	}
	var sum, weights float64
	for i, v := range forecast[:min(len(forecast), len(ecoWeights))] {
		if !validCarbon(v) {
			return 0, false
		}
		sum += ecoWeights[i] * v
		weights += ecoWeights[i]
	}
	return sum / weights, true
}

func validCarbon(v float64) bool { return api.CheckCarbon("", v) == nil }

// perGiB is 2^-30 = 5^30 × 10^-30, an exact decimal: bytes × perGiB is
// GiB.
var perGiB = inf.NewDecBig(new(big.Int).Exp(big.NewInt(5), big.NewInt(30), nil), 30)

// CostPerChunk is the exact hourly price of one chunk: the sum over the
// chunk's resources of unit price × amount, where cpu counts in cores,
// memory in GiB (bytes ÷ 2^30) and any other resource in whole units. Extra
// price keys are ignored. ok is false (unpriced) when prices is empty, when
// a resource of the chunk has no price, or when any price is negative. The
// result is exact (a finite decimal) and freshly allocated.
func CostPerChunk(prices, chunk corev1.ResourceList) (*inf.Dec, bool) {
	if len(prices) == 0 || len(chunk) == 0 {
		return nil, false
	}
	for _, p := range prices {
		if p.Sign() < 0 {
			return nil, false
		}
	}
	total := new(inf.Dec)
	for name, amount := range chunk {
		price, ok := prices[name]
		if !ok {
			return nil, false
		}
		units := amount.AsDec()
		if name == corev1.ResourceMemory {
			units = new(inf.Dec).Mul(units, perGiB)
		}
		total.Add(total, new(inf.Dec).Mul(price.AsDec(), units))
	}
	return total, true
}

// CostQuantity is the wire form of an exact cost: rounded half-up to nano
// units (Quantity's finest precision; the reference truncates to milli,
// bug #11), as a DecimalSI Quantity, so 0.052 is "52m" and 1.304 "1304m".
func CostQuantity(cost *inf.Dec) *resource.Quantity {
	r := new(inf.Dec).Round(cost, 9, inf.RoundHalfUp)
	if u, ok := r.Unscaled(); ok {
		return resource.NewScaledQuantity(u, resource.Nano)
	}
	return resource.NewDecimalQuantity(*r, resource.DecimalSI)
}

// earthRadiusKM is the mean Earth radius used by the Latency policy.
const earthRadiusKM = 6371.0

// DistanceKM is the haversine great-circle distance in km between two
// points given in decimal degrees (Earth radius 6371.0 km).
func DistanceKM(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusKM * math.Asin(math.Sqrt(math.Min(1, a)))
}
