package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceRequestPhase is where a ResourceRequest stands. As in the
// reference, the CRD does not validate it as an enum.
type ResourceRequestPhase string

// ResourceRequest phases.
const (
	ResourceRequestPending   ResourceRequestPhase = "Pending"
	ResourceRequestReserved  ResourceRequestPhase = "Reserved"
	ResourceRequestActive    ResourceRequestPhase = "Active"
	ResourceRequestMigrating ResourceRequestPhase = "Migrating"
	ResourceRequestFailed    ResourceRequestPhase = "Failed"
)

// ResourceRequestFinalizer keeps a ResourceRequest until its reservation is
// released.
const ResourceRequestFinalizer = "autoscaling.federation-autoscaler.io/release-reservation"

// ResourceRequestSpec is the capacity a consumer asks for outside the
// Cluster Autoscaler's flow.
type ResourceRequestSpec struct {
	// Resources is the capacity asked for.
	Resources corev1.ResourceList `json:"resources"`
	// Duration is a Go duration string; recorded, not enforced.
	// +optional
	Duration string `json:"duration,omitempty"`
	// Priority is recorded, not enforced.
	// +optional
	Priority int32 `json:"priority,omitempty"`
}

// ResourceRequestStatus is what became of a ResourceRequest.
type ResourceRequestStatus struct {
	// +optional
	Phase ResourceRequestPhase `json:"phase,omitempty"`
	// +optional
	ReservationID string `json:"reservationId,omitempty"`
	// +optional
	ProviderClusterID string `json:"providerClusterId,omitempty"`
	// +optional
	ChunkCount int32 `json:"chunkCount,omitempty"`
	// +optional
	MigrationCount int32 `json:"migrationCount,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ResourceRequest asks the broker for capacity on the consumer's behalf.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rr,categories=federation-autoscaler
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reservation",type=string,JSONPath=`.status.reservationId`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.status.providerClusterId`
// +kubebuilder:printcolumn:name="Chunks",type=integer,JSONPath=`.status.chunkCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceRequestSpec   `json:"spec"`
	Status ResourceRequestStatus `json:"status,omitempty"`
}

// ResourceRequestList is a list of ResourceRequest.
//
// +kubebuilder:object:root=true
type ResourceRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceRequest `json:"items"`
}
