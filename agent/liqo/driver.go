// Package liqo is the agents' seam to Liqo: the Driver interface (mint or
// revoke a peering credential on the provider, peer or unpeer on the
// consumer), its liqoctl implementation, and the helpers that build the
// ResourceSlice through which a consumer asks a peered provider for one
// chunk-sized virtual node. The simulated implementation for clusters
// without Liqo lives in mocks/liqo.
package liqo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Driver is what the agents need from Liqo. Every method is safe to call
// again after a failure or a restart: it converges to the requested state.
// Cluster ids are Liqo cluster ids (never the broker's cluster ids).
type Driver interface {
	// GeneratePeeringUser runs on the provider. It mints a credential scoped
	// to the consumer with the given Liqo cluster id and returns it as
	// kubeconfig text, which the broker relays to that consumer.
	GeneratePeeringUser(ctx context.Context, consumerLiqoClusterID string) (kubeconfig string, err error)
	// DeletePeeringUser runs on the provider and revokes that credential. A
	// credential that does not exist is success.
	DeletePeeringUser(ctx context.Context, consumerLiqoClusterID string) error
	// Peer runs on the consumer: it establishes the peering with the
	// provider using the kubeconfig GeneratePeeringUser returned there. It
	// creates no ResourceSlice (the caller creates one per chunk). Peering
	// with an already peered provider is success.
	Peer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error
	// Unpeer runs on the consumer and tears the peering down, with every
	// ResourceSlice and virtual node of that provider, and removes its
	// ForeignCluster. kubeconfig is the credential Peer was given (liqoctl
	// unpeer talks to both clusters); keep it until Unpeer succeeded.
	// Unpeering a provider that is not peered is success.
	Unpeer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error
}

// Labels, annotations and values Liqo v1.1.2 reads on the consumer
// (github.com/liqotech/liqo/pkg/consts), restated here so that importing
// this package does not pull Liqo's internals in.
const (
	// ReplicationLabel=true asks Liqo to replicate a resource to the remote cluster.
	ReplicationLabel = "liqo.io/replication"
	// RemoteIDLabel names the cluster a replicated resource is sent to.
	RemoteIDLabel = "liqo.io/remoteID"
	// RemoteClusterIDLabel names the remote cluster on slices and virtual nodes.
	RemoteClusterIDLabel = "liqo.io/remote-cluster-id"
	// CreateVirtualNodeAnnotation on a ResourceSlice makes Liqo build a
	// VirtualNode for it once accepted (unless empty or "false").
	CreateVirtualNodeAnnotation = "liqo.io/create-virtual-node"
	// TypeLabel=VirtualNodeType marks the Nodes Liqo creates.
	TypeLabel       = "liqo.io/type"
	VirtualNodeType = "virtual-node"
	// VirtualNodeTaintKey is the NoExecute taint (value "true") of virtual
	// nodes; only pods tolerating it are offloaded.
	VirtualNodeTaintKey = "virtual-node.liqo.io/not-allowed"
	// ResourceSliceClassDefault is the slice class Liqo's default provider
	// handler accepts.
	ResourceSliceClassDefault = authv1beta1.ResourceSliceClassDefault
)

// TenantNamespace is the namespace Liqo keeps a peered provider's resources
// in on the consumer: "liqo-tenant-<providerLiqoClusterID>".
func TenantNamespace(providerLiqoClusterID string) string {
	return "liqo-tenant-" + providerLiqoClusterID
}

// NewResourceSlice builds the ResourceSlice that asks the provider for one
// virtual node with the given resources: class "default", the consumer and
// provider ids in the spec, and the labels and annotation without which Liqo
// neither replicates the slice nor creates the virtual node. The VirtualNode
// and the Node Liqo then creates carry the slice's name.
func NewResourceSlice(name, tenantNamespace, consumerLiqoClusterID, providerLiqoClusterID string, resources corev1.ResourceList) *authv1beta1.ResourceSlice {
	consumer := liqocorev1beta1.ClusterID(consumerLiqoClusterID)
	provider := liqocorev1beta1.ClusterID(providerLiqoClusterID)
	return &authv1beta1.ResourceSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: authv1beta1.GroupVersion.String(), Kind: authv1beta1.ResourceSliceKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: tenantNamespace,
			Labels: map[string]string{
				ReplicationLabel:     "true",
				RemoteIDLabel:        providerLiqoClusterID,
				RemoteClusterIDLabel: providerLiqoClusterID,
			},
			Annotations: map[string]string{CreateVirtualNodeAnnotation: "true"},
		},
		Spec: authv1beta1.ResourceSliceSpec{
			ConsumerClusterID: &consumer,
			ProviderClusterID: &provider,
			Resources:         resources.DeepCopy(),
			Class:             ResourceSliceClassDefault,
		},
	}
}

// CheckResourceSlice reports why Liqo would not accept the slice (nil when
// it would): the three labels, their agreement with spec.providerClusterID,
// and the tenant namespace. Whether a virtual node follows is a separate
// question (WantsVirtualNode).
func CheckResourceSlice(rs *authv1beta1.ResourceSlice) error {
	provider := rs.Labels[RemoteClusterIDLabel]
	switch {
	case rs.Labels[ReplicationLabel] != "true":
		return fmt.Errorf("label %s=true is missing", ReplicationLabel)
	case provider == "":
		return fmt.Errorf("label %s is missing", RemoteClusterIDLabel)
	case rs.Labels[RemoteIDLabel] != provider:
		return fmt.Errorf("label %s=%q does not match %s=%q", RemoteIDLabel, rs.Labels[RemoteIDLabel], RemoteClusterIDLabel, provider)
	case rs.Spec.ProviderClusterID != nil && string(*rs.Spec.ProviderClusterID) != provider:
		return fmt.Errorf("spec.providerClusterID %q does not match label %s=%q", *rs.Spec.ProviderClusterID, RemoteClusterIDLabel, provider)
	case rs.Namespace != TenantNamespace(provider):
		return fmt.Errorf("namespace %q is not the tenant namespace %q", rs.Namespace, TenantNamespace(provider))
	}
	return nil
}

// WantsVirtualNode reports whether the slice asks Liqo for a virtual node
// (annotation present, not empty and not "false").
func WantsVirtualNode(rs *authv1beta1.ResourceSlice) bool {
	v, ok := rs.Annotations[CreateVirtualNodeAnnotation]
	return ok && v != "" && v != "false"
}

// CheckClusterID checks a Liqo cluster id before it reaches Liqo (a liqoctl
// command line, a tenant namespace, a slice): the broker's rule
// api.CheckLiqoClusterID, a DNS-1123 label short enough that
// TenantNamespace(id) is one too. Both drivers check every id with it.
func CheckClusterID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if fe := api.CheckLiqoClusterID(what, id); fe != nil {
		return fmt.Errorf("%s %s is not a valid Liqo cluster id: it must be %s", what, api.ShowString(id), fe.Want)
	}
	return nil
}
