package console

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/agent/provider"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// MaxPendingPods bounds how many pending pods the console reads per render
// (one list call with this limit); pods beyond it are not examined.
const MaxPendingPods = 500

// PodReader lists pods (a controller-runtime client.Reader). Listing pods
// cluster-wide needs the federation-autoscaler:consumer-console
// ClusterRole (deploy/rbac/optional/consumer-console.yaml).
type PodReader interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// unfitPods returns the pending pods the scheduler marked unschedulable
// whose requests fit no chunk offered in groups (placement.Fits against each
// chunk type's shape): no node group can ever hold them, so the Cluster
// Autoscaler leaves them pending without a word. Nothing is reported while
// no group is offered (no shape to compare with).
func unfitPods(ctx context.Context, r PodReader, groups []api.NodeGroupView) ([]web.UnfitPod, error) {
	shapes := map[api.ChunkType]corev1.ResourceList{}
	for _, g := range groups {
		if _, ok := shapes[g.Type]; !ok && len(g.ChunkResources) > 0 {
			shapes[g.Type] = g.ChunkResources
		}
	}
	if len(shapes) == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.Limit(MaxPendingPods),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("status.phase", string(corev1.PodPending))}); err != nil {
		return nil, fmt.Errorf("listing pending pods: %w", err)
	}
	var out []web.UnfitPod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" || !unschedulable(p) {
			continue
		}
		req := provider.PodRequests(p)
		fits := false
		for _, shape := range shapes {
			fits = fits || placement.Fits(shape, req)
		}
		if !fits {
			out = append(out, web.UnfitPod{Namespace: p.Namespace, Name: p.Name, Requests: req})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// unschedulable reports whether the scheduler gave up on p for now
// (PodScheduled=False, reason Unschedulable): the pods the Cluster
// Autoscaler tries to make room for.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
