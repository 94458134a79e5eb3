package liqo

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
)

// EnsureResourceSlice makes sure the slice want exists, whatever happened
// before (a redelivered Peer, an agent restart between Create and its
// answer). It reads first and creates only a slice that is absent: Liqo's
// validating webhook (pkg/webhooks/resourceslice) refuses a second Create of
// a slice name with Forbidden before the store could answer AlreadyExists, so
// "create, tolerate AlreadyExists" never converges on a real Liqo. A slice of
// that name that exists is success when it is the one asked for (same
// labels, class, provider and resources); a different one is an error that
// says what differs. Both drivers' consumers create slices only through
// this function.
//
// The tenant namespace must exist: Liqo creates it when peering (liqoctl
// peer; the simulated driver's Peer does the same), and the consumer agent
// never creates it (its role may not create namespaces).
func EnsureResourceSlice(ctx context.Context, c client.Client, want *authv1beta1.ResourceSlice) error {
	if err := CheckResourceSlice(want); err != nil {
		return fmt.Errorf("the ResourceSlice %s/%s: %w", want.Namespace, want.Name, err)
	}
	key := client.ObjectKeyFromObject(want)
	var live authv1beta1.ResourceSlice
	err := c.Get(ctx, key, &live)
	switch {
	case err == nil:
		return sameSlice(&live, want)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading ResourceSlice %s: %w", key, err)
	}
	cerr := c.Create(ctx, want.DeepCopy())
	if cerr == nil {
		return nil
	}
	if apierrors.IsAlreadyExists(cerr) || apierrors.IsForbidden(cerr) {
		// Another writer (or our own earlier attempt) won the race, or Liqo's
		// webhook refused a duplicate name: read what is there.
		if err := c.Get(ctx, key, &live); err == nil {
			return sameSlice(&live, want)
		}
	}
	if apierrors.IsNotFound(cerr) {
		return fmt.Errorf("creating ResourceSlice %s: tenant namespace %s does not exist: the peering with %s has not created it (Liqo creates it on peer): %w",
			key, want.Namespace, want.Labels[RemoteClusterIDLabel], cerr)
	}
	return fmt.Errorf("creating ResourceSlice %s: %w", key, cerr)
}

// sameSlice reports nil when live is the slice want asks for: want's labels
// and annotations present with the same values, and the same class, provider
// and resources. spec.consumerClusterID is not compared: Liqo fills it.
func sameSlice(live, want *authv1beta1.ResourceSlice) error {
	var diff string
	switch {
	case !subset(want.Labels, live.Labels):
		diff = fmt.Sprintf("labels %v, want at least %v", live.Labels, want.Labels)
	case !subset(want.Annotations, live.Annotations):
		diff = fmt.Sprintf("annotations %v, want at least %v", live.Annotations, want.Annotations)
	case live.Spec.Class != want.Spec.Class:
		diff = fmt.Sprintf("class %q, want %q", live.Spec.Class, want.Spec.Class)
	case !equality.Semantic.DeepEqual(live.Spec.ProviderClusterID, want.Spec.ProviderClusterID):
		diff = "a different spec.providerClusterID"
	case !equality.Semantic.DeepEqual(live.Spec.Resources, want.Spec.Resources):
		diff = fmt.Sprintf("resources %v, want %v", live.Spec.Resources, want.Spec.Resources)
	default:
		return nil
	}
	return fmt.Errorf("the ResourceSlice %s/%s already exists but is not the one asked for (%s): delete it, or free the reservation that owns it", live.Namespace, live.Name, diff)
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}
