// Package placement decides which providers a consumer may grow on: it
// cuts advertised capacity into chunks, ranks providers by the consumer's
// policy (Standard, Price, Eco, Latency, Weighted), applies providers'
// sharing rules, and masks the node-group view so the Cluster Autoscaler sees
// exactly one growable group per chunk type (a shortlist under Latency).
//
// It is pure logic with no I/O. The broker's domain (server/reservations)
// owns the capacity ledger and keeps an Index in step with it; NodeGroups
// asks the Index for a consumer's view.
package placement

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// ChunkConfig is the shape of one chunk per chunk type.
type ChunkConfig struct {
	Standard corev1.ResourceList
	GPU      corev1.ResourceList
}

// Provider is what the Index knows of one provider (from its latest
// advertisement). Capacity per chunk type is derived with Chunks.
type Provider struct {
	ID              string
	LiqoID          string
	Resources       corev1.ResourceList
	Topology        *api.Topology
	UnitPrices      corev1.ResourceList
	CarbonIntensity *float64
	CarbonForecast  []float64
	Renewable       bool
	ProbeEndpoint   string
	Sharing         *api.Sharing
	// Available is false while the provider is stale.
	Available bool
}

// Consumer is what the Index knows of one consumer (from its latest
// heartbeat).
type Consumer struct {
	ID        string
	Placement api.Placement
	Latitude  *float64
	Longitude *float64
}

// Usage is one consumer's reservations on one provider × chunk type.
type Usage struct {
	// Live counts non-terminal reservations (they hold a chunk).
	Live int32
	// InFlight counts reservations still peering (phase "", Pending,
	// GeneratingKubeconfig, KubeconfigReady, Peering).
	InFlight int32
}
