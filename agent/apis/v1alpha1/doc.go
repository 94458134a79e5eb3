// Package v1alpha1 holds the consumer-side custom resources of Federation
// Autoscaler (API group autoscaling.federation-autoscaler.io, version
// v1alpha1, all namespaced): ConsumerPolicy and VirtualNodeState, field
// for field as the reference's §8.2, plus the Weighted policy's weights.
// The reference's ResourceRequest kind is not served: manual reservations
// go through the consumer agent's local API (the consumer console).
//
// The deepcopy functions (zz_generated.deepcopy.go) and the CRD manifests in
// deploy/crds are generated from these types by `make generate`
// (controller-gen); edit the types and their markers, never the output.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.federation-autoscaler.io
package v1alpha1
