package liqo

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where Liqo v1.1.2 keeps the cluster's own Liqo id: the ConfigMap its chart
// installs (templates/liqo-clusterid-configmap.yaml: "<release>-clusterid-configmap",
// release "liqo" as `liqoctl install` names it) in the Liqo namespace,
// labelled as Liqo itself finds it (pkg/utils.GetClusterIDWithControllerClient),
// key CLUSTER_ID. `liqoctl install` writes a random UUID there unless given
// --cluster-id, and Liqo's chart refuses to change it later.
const (
	// DefaultNamespace is the namespace Liqo is installed in by default.
	DefaultNamespace = "liqo"
	// ClusterIDConfigMapName is the ConfigMap's name. The agent reads it by
	// name, so its role can be narrowed to this one object.
	ClusterIDConfigMapName = "liqo-clusterid-configmap"
	// ClusterIDConfigMapLabel=ClusterIDConfigMapLabelValue is the label Liqo
	// selects it by; the agent checks it is there.
	ClusterIDConfigMapLabel      = "app.kubernetes.io/name"
	ClusterIDConfigMapLabelValue = "clusterid-configmap"
	// ClusterIDConfigMapKey is the data key holding the id.
	ClusterIDConfigMapKey = "CLUSTER_ID"
)

// LocalClusterID reads this cluster's Liqo cluster id from Liqo: the
// clusterid ConfigMap in namespace (DefaultNamespace when empty), the id
// Liqo's own components and liqoctl use. It fails, saying what to do, when
// Liqo is not installed there, when the ConfigMap is not Liqo's or when its
// id is not a valid Liqo cluster id (CheckClusterID).
func LocalClusterID(ctx context.Context, c client.Reader, namespace string) (string, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: namespace, Name: ClusterIDConfigMapName}
	switch err := c.Get(ctx, key, &cm); {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("no Liqo installation in namespace %s: its ConfigMap %s, which holds the cluster's Liqo id, does not exist; install Liqo v1.1.2 (liqoctl install), or point --liqo-namespace at the namespace it is installed in",
			namespace, ClusterIDConfigMapName)
	case err != nil:
		return "", fmt.Errorf("reading the cluster's Liqo id from ConfigMap %s: %w", key, err)
	}
	if cm.Labels[ClusterIDConfigMapLabel] != ClusterIDConfigMapLabelValue {
		return "", fmt.Errorf("the ConfigMap %s is not Liqo's clusterid ConfigMap (label %s=%s missing): the Liqo installation is broken; reinstall Liqo",
			key, ClusterIDConfigMapLabel, ClusterIDConfigMapLabelValue)
	}
	id, ok := cm.Data[ClusterIDConfigMapKey]
	if !ok {
		return "", fmt.Errorf("the Liqo ConfigMap %s has no %s key: the Liqo installation is broken; reinstall Liqo", key, ClusterIDConfigMapKey)
	}
	if err := CheckClusterID("the cluster id in Liqo's ConfigMap "+key.String(), id); err != nil {
		return "", err
	}
	return id, nil
}

// ResolveClusterID returns the cluster's Liqo cluster id read from Liqo
// (LocalClusterID). configured, when not empty, is what the operator said it
// is (--liqo-cluster-id): it must agree, since the provider mints the
// peering user for that id and Liqo checks it on peer; a mismatch is refused
// naming both ids.
func ResolveClusterID(ctx context.Context, c client.Reader, namespace, configured string) (string, error) {
	id, err := LocalClusterID(ctx, c, namespace)
	if err != nil {
		return "", err
	}
	if configured != "" && configured != id {
		return "", fmt.Errorf("--liqo-cluster-id %s disagrees with Liqo's own cluster id %s (ConfigMap %s/%s): Liqo owns the id, so drop --liqo-cluster-id or set it to %s",
			configured, id, cmp.Or(namespace, DefaultNamespace), ClusterIDConfigMapName, id)
	}
	return id, nil
}
