package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "autoscaling.federation-autoscaler.io"

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's kinds in a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds ConsumerPolicy and VirtualNodeState (and their lists)
	// to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ConsumerPolicy{}, &ConsumerPolicyList{},
		&VirtualNodeState{}, &VirtualNodeStateList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
