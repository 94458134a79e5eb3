package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualNodeStatePhase is the lifecycle phase of one borrowed virtual node.
// +kubebuilder:validation:Enum=Creating;Running;Deleting;Failed
type VirtualNodeStatePhase string

// VirtualNodeState phases: Creating until the virtual node is Ready, Running
// while it is, Deleting once removal started; Failed when it cannot get there.
const (
	VirtualNodeCreating VirtualNodeStatePhase = "Creating"
	VirtualNodeRunning  VirtualNodeStatePhase = "Running"
	VirtualNodeDeleting VirtualNodeStatePhase = "Deleting"
	VirtualNodeFailed   VirtualNodeStatePhase = "Failed"
)

// VirtualNodeState condition types.
const (
	VirtualNodeConditionReady  = "Ready"
	VirtualNodeConditionFailed = "Failed"
)

// ReservationLabel labels a VirtualNodeState (and what the consumer agent
// creates for a reservation) with the reservation id.
const ReservationLabel = "federation-autoscaler.io/reservation"

// VirtualNodeStateName is the name of the VirtualNodeState of a
// reservation: "vns-<reservationID>".
func VirtualNodeStateName(reservationID string) string { return "vns-" + reservationID }

// VirtualNodeStateSpec is what the consumer agent set up for one reservation.
type VirtualNodeStateSpec struct {
	// ProviderClusterID is the broker's id of the provider.
	// +kubebuilder:validation:MinLength=1
	ProviderClusterID string `json:"providerClusterId"`
	// ProviderLiqoClusterID is the provider's Liqo cluster id.
	// +kubebuilder:validation:MinLength=1
	ProviderLiqoClusterID string `json:"providerLiqoClusterId"`
	// ResourceSliceName is the Liqo ResourceSlice created for the chunk.
	// +optional
	ResourceSliceName string `json:"resourceSliceName,omitempty"`
	// NodeGroupID is the Cluster Autoscaler node group the node belongs to.
	// +kubebuilder:validation:MinLength=1
	NodeGroupID string `json:"nodeGroupId"`
	// ChunkIndex is always 0: one virtual node per reservation.
	// +kubebuilder:validation:Minimum=0
	ChunkIndex int32 `json:"chunkIndex"`
	// ReservationID is the broker's reservation id.
	// +kubebuilder:validation:MinLength=1
	ReservationID string `json:"reservationId"`
	// Resources is the chunk's size.
	Resources corev1.ResourceList `json:"resources"`
}

// VirtualNodeStateStatus mirrors the virtual node.
type VirtualNodeStateStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase VirtualNodeStatePhase `json:"phase,omitempty"`
	// VirtualNodeName is the Node Liqo created for the slice.
	// +optional
	VirtualNodeName string `json:"virtualNodeName,omitempty"`
	// ProviderID is the Node's spec.providerID (liqo://<provider>/<reservation>).
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// +optional
	ResourceSliceName string `json:"resourceSliceName,omitempty"`
	// Allocatable is the Node's status.allocatable.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Conditions of types Ready and Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VirtualNodeState tracks the one chunk-sized virtual node of a reservation
// on the consumer cluster. Its name is VirtualNodeStateName(reservation) and
// it carries the ReservationLabel.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vns,categories=federation-autoscaler
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerClusterId`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.virtualNodeName`
// +kubebuilder:printcolumn:name="Reservation",type=string,JSONPath=`.spec.reservationId`,priority=1
// +kubebuilder:printcolumn:name="NodeGroup",type=string,JSONPath=`.spec.nodeGroupId`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualNodeState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualNodeStateSpec   `json:"spec"`
	Status VirtualNodeStateStatus `json:"status,omitempty"`
}

// VirtualNodeStateList is a list of VirtualNodeState.
//
// +kubebuilder:object:root=true
type VirtualNodeStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualNodeState `json:"items"`
}
