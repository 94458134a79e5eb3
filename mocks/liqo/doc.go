// Package liqosim (import path mocks/liqo) is a simulated Liqo: it does to
// the Kubernetes API what Liqo v1.1.2 does for the parts Federation
// Autoscaler relies on, so the agents run end to end on clusters without
// Liqo — a real kube-apiserver in tests or the demo's simulated clusters.
//
// It has two halves:
//   - Driver implements agent/liqo.Driver: Peer records the peering as a
//     ForeignCluster and ensures the tenant namespace; Unpeer removes the
//     provider's ResourceSlices, VirtualNodes, Nodes and ForeignCluster;
//     GeneratePeeringUser returns a well-formed kubeconfig without secrets.
//   - Controller plays Liqo's virtual-node machinery on the consumer: it
//     accepts correctly labelled ResourceSlices of peered providers, denies
//     the others, and after a configurable delay creates the VirtualNode and
//     a Ready Node (Liqo's labels and taint, capacity = the slice, no
//     providerID); it removes both when the slice goes or the provider is
//     unpeered. It reconciles from the current state, so it is idempotent
//     and converges after a restart.
//
// It uses only standard API calls (get, list, watch, create, update,
// delete, status updates) through controller-runtime. It does not model
// networking, authentication, resource offloading, node heartbeats or the
// provider side of a peering; see docs/liqo.md.
package liqosim
