package liqosim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// InstallClusterID plays the part of `liqoctl install --cluster-id id` that
// the agents rely on: Liqo's clusterid ConfigMap in namespace (the namespace
// is created only when it is missing), named and labelled as Liqo's chart
// makes it. Like Liqo's chart it never changes an id that is already there,
// so the id stays Liqo-owned: the agent then reads it back with
// liqo.ResolveClusterID, exactly as with the real Liqo, and a
// --liqo-cluster-id that disagrees is refused the same way. It only creates
// (the role needs create on ConfigMaps in that namespace, and on namespaces
// only when it does not exist).
func InstallClusterID(ctx context.Context, c client.Client, namespace, id string) error {
	if err := liqo.CheckClusterID("the simulated Liqo's cluster id", id); err != nil {
		return err
	}
	if namespace == "" {
		namespace = liqo.DefaultNamespace
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: liqo.ClusterIDConfigMapName, Namespace: namespace, Labels: map[string]string{
			liqo.ClusterIDConfigMapLabel: liqo.ClusterIDConfigMapLabelValue,
			"app.kubernetes.io/part-of":  "liqo",
		}},
		Data: map[string]string{liqo.ClusterIDConfigMapKey: id},
	}
	err := c.Create(ctx, cm.DeepCopy())
	if apierrors.IsNotFound(err) { // no such namespace yet
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the simulated Liqo's namespace %s: %w", namespace, err)
		}
		err = c.Create(ctx, cm.DeepCopy())
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the simulated Liqo's cluster id to ConfigMap %s/%s: %w", namespace, cm.Name, err)
	}
	return nil
}
