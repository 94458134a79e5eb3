// Package preflight checks an agent's world before the agent starts: the
// namespace it owns exists (it is created when missing), and what the agent
// reads can be read. Every failure says what is missing and how to fix it,
// so an agent that could not do its job refuses to start instead of
// reporting healthy while every instruction fails.
package preflight

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedByLabel marks a namespace an agent created.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedBy is ManagedByLabel's value.
const ManagedBy = "federation-autoscaler"

// EnsureNamespace makes sure namespace name exists, creating it (labelled
// ManagedByLabel) when it does not. created reports whether it did. When
// the agent may neither read nor create namespaces, or may not create a
// missing one, the error says which permission to grant (or to create the
// namespace beforehand).
func EnsureNamespace(ctx context.Context, c client.Client, name string) (created bool, err error) {
	var ns corev1.Namespace
	getErr := c.Get(ctx, client.ObjectKey{Name: name}, &ns)
	switch {
	case getErr == nil:
		if ns.DeletionTimestamp != nil {
			return false, fmt.Errorf("namespace %s is being deleted: wait until it is gone and start the agent again (it then creates it), or use another --namespace", name)
		}
		return false, nil
	case !apierrors.IsNotFound(getErr) && !apierrors.IsForbidden(getErr):
		return false, fmt.Errorf("reading namespace %s: %w", name, getErr)
	}
	// Missing, or we may not look: create it (AlreadyExists answers the
	// question in the second case).
	err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedBy}}})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case apierrors.IsForbidden(err) && apierrors.IsForbidden(getErr):
		return false, fmt.Errorf("cannot tell whether namespace %s exists: the agent may neither get nor create namespaces (%v); grant get on namespaces (deploy/rbac does) or run with a --namespace it can see", name, err)
	case apierrors.IsForbidden(err):
		return false, fmt.Errorf("namespace %s does not exist and the agent may not create it (%v): create it (kubectl create namespace %s) or grant create on namespaces", name, err, name)
	}
	return false, fmt.Errorf("creating namespace %s: %w", name, err)
}

// CanList checks that the agent may list list's kind (in namespace ns, or
// cluster-wide when ns is empty) and that the kind is served: a missing
// CRD or a missing RBAC rule is reported with what to do.
func CanList(ctx context.Context, c client.Client, list client.ObjectList, ns string) error {
	opts := []client.ListOption{client.Limit(1)}
	where := "cluster-wide"
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
		where = "in namespace " + ns
	}
	err := c.List(ctx, list, opts...)
	kind := strings.TrimSuffix(reflect.TypeOf(list).Elem().Name(), "List")
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("the API server does not serve %s (%v): install the CRDs (--install-crds, or kubectl apply -f deploy/crds and Liqo's)", kind, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the agent may not list %s %s (%v): grant it (deploy/rbac has the agents' roles)", kind, where, err)
	}
	return fmt.Errorf("listing %s %s: %w", kind, where, err)
}
