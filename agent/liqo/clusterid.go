package liqo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where Liqo v1.1.2 keeps the cluster's own Liqo id: the ConfigMap its chart
// installs (templates/liqo-clusterid-configmap.yaml, named
// "<release>-clusterid-configmap") in the Liqo namespace, found by label as
// Liqo itself finds it (pkg/utils.GetClusterIDWithControllerClient), key
// CLUSTER_ID. `liqoctl install` writes a random UUID there unless given
// --cluster-id, and Liqo refuses to change it later.
const (
	// DefaultNamespace is the namespace Liqo is installed in by default.
	DefaultNamespace = "liqo"
	// ClusterIDConfigMapLabel=ClusterIDConfigMapLabelValue selects the ConfigMap.
	ClusterIDConfigMapLabel      = "app.kubernetes.io/name"
	ClusterIDConfigMapLabelValue = "clusterid-configmap"
	// ClusterIDConfigMapKey is the data key holding the id.
	ClusterIDConfigMapKey = "CLUSTER_ID"
	// ClusterIDConfigMapName is the name Liqo's chart gives the ConfigMap
	// (release "liqo"); the simulated Liqo writes the same one.
	ClusterIDConfigMapName = "liqo-clusterid-configmap"
)

// LocalClusterID reads this cluster's Liqo cluster id from Liqo (the
// clusterid ConfigMap in namespace, DefaultNamespace when empty), as Liqo's
// own components and liqoctl do. It fails, saying what to do, when Liqo is
// not installed there, when the ConfigMap is ambiguous or when its id is not
// a valid Liqo cluster id (CheckClusterID).
func LocalClusterID(ctx context.Context, c client.Reader, namespace string) (string, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{ClusterIDConfigMapLabel: ClusterIDConfigMapLabelValue}); err != nil {
		return "", fmt.Errorf("reading Liqo's cluster id (ConfigMaps labelled %s=%s in namespace %s): %w",
			ClusterIDConfigMapLabel, ClusterIDConfigMapLabelValue, namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return "", fmt.Errorf("Liqo is not installed in namespace %s: no ConfigMap labelled %s=%s holds its cluster id; install Liqo v1.1.2 (liqoctl install), or point --liqo-namespace at the namespace it is installed in",
			namespace, ClusterIDConfigMapLabel, ClusterIDConfigMapLabelValue)
	case 1:
	default:
		return "", fmt.Errorf("namespace %s has %d ConfigMaps labelled %s=%s: Liqo keeps exactly one; remove the stray ones",
			namespace, len(list.Items), ClusterIDConfigMapLabel, ClusterIDConfigMapLabelValue)
	}
	cm := &list.Items[0]
	id, ok := cm.Data[ClusterIDConfigMapKey]
	if !ok {
		return "", fmt.Errorf("Liqo's ConfigMap %s/%s has no %s key: the Liqo installation is broken; reinstall Liqo", cm.Namespace, cm.Name, ClusterIDConfigMapKey)
	}
	if err := CheckClusterID("Liqo's cluster id (ConfigMap "+cm.Namespace+"/"+cm.Name+")", id); err != nil {
		return "", err
	}
	return id, nil
}

// ResolveClusterID returns the cluster's Liqo cluster id read from Liqo
// (LocalClusterID). configured, when not empty, is what the operator said it
// is (--liqo-cluster-id): it must agree, since the provider mints the
// peering user for that id and Liqo checks it on peer; a mismatch is refused
// with both ids.
func ResolveClusterID(ctx context.Context, c client.Reader, namespace, configured string) (string, error) {
	id, err := LocalClusterID(ctx, c, namespace)
	if err != nil {
		return "", err
	}
	if configured != "" && configured != id {
		return "", fmt.Errorf("--liqo-cluster-id %s disagrees with Liqo's own cluster id %s (read from Liqo's clusterid ConfigMap): Liqo owns the id, so drop --liqo-cluster-id or set it to %s", configured, id, id)
	}
	return id, nil
}
