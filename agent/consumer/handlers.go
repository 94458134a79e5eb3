package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// Object names derived from a reservation id (reference §7.1).
func sliceName(res string) string  { return "rs-" + res }
func secretName(res string) string { return "kubeconfig-" + res }

// kubeconfigKey is the data key of the kubeconfig Secrets.
const kubeconfigKey = "kubeconfig"

func checkReservationID(id string) error {
	if id == "" {
		return api.Errorf(api.CodeInvalidRequest, "instruction carries no reservationId")
	}
	// rs-<id> and kubeconfig-<id> must be valid object names.
	if msgs := validation.IsDNS1123Subdomain("kubeconfig-" + id); len(msgs) > 0 {
		return api.Errorf(api.CodeInvalidRequest, "reservation id %q cannot name Kubernetes objects: %v", id, msgs)
	}
	return nil
}

// chunkTypeOf classifies a chunk: any GPU makes it a gpu chunk.
func chunkTypeOf(in api.InstructionView) api.ChunkType {
	if in.ChunkType != "" {
		return in.ChunkType
	}
	if q, ok := in.ResourceSliceResources["nvidia.com/gpu"]; ok && q.Sign() > 0 {
		return api.ChunkGPU
	}
	return api.ChunkStandard
}

// handlePeer peers with the provider and asks it for exactly one
// chunk-sized virtual node. Every step converges, so a redelivered Peer
// (after an agent or broker restart) repeats nothing that is done.
func (a *Agent) handlePeer(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
	res := in.ReservationID
	if t, ok := a.reserved.LoadAndDelete(res); ok {
		d := a.cfg.Clock.Since(t.(time.Time))
		a.reserveToPeer.Observe(d.Seconds())
		if a.cfg.ObserveReserveToPeer != nil {
			a.cfg.ObserveReserveToPeer(res, d)
		}
	}
	if err := checkReservationID(res); err != nil {
		return nil, err
	}
	prov, provLiqo := in.ProviderClusterID, in.ProviderLiqoClusterID
	if prov == "" || provLiqo == "" {
		return nil, api.Errorf(api.CodeInvalidRequest, "Peer %s names no provider", in.ID)
	}
	if len(in.ResourceSliceResources) == 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "Peer %s carries no resourceSliceResources to size the slice", in.ID)
	}
	log := a.log.With("reservation", res, "provider", prov)

	// 1. Keep the credential while the reservation needs it.
	kc, err := a.ensureSecret(ctx, res, prov, in.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// 2. Peer (a no-op when already peered).
	if err := a.cfg.Driver.Peer(ctx, provLiqo, kc); err != nil {
		return nil, fmt.Errorf("peering with %s: %w", provLiqo, err)
	}
	// 3. Exactly one ResourceSlice, then the VirtualNodeState.
	if err := a.ensureSlice(ctx, res, provLiqo, in.ResourceSliceResources); err != nil {
		return nil, err
	}
	ngID := in.NodeGroupID
	if ngID == "" {
		ngID = api.NodeGroupID(prov, chunkTypeOf(in))
	}
	if err := a.ensureVNS(ctx, res, prov, provLiqo, ngID, in.ResourceSliceResources); err != nil {
		return nil, err
	}
	a.proj.kick()
	// 4. Wait for Liqo (or the sim) to build the node and give it its
	// providerID.
	node, err := a.waitForNode(ctx, sliceName(res))
	if err != nil {
		log.Warn("The virtual node did not appear; undoing the chunk", "err", err)
		if cerr := a.removeLocal(context.WithoutCancel(ctx), res, provLiqo, false); cerr != nil {
			log.Warn("Undoing the chunk failed", "err", cerr)
		}
		return nil, err
	}
	if err := a.ensureProviderID(ctx, node, api.ProviderID(prov, res)); err != nil {
		return nil, err
	}
	a.proj.kick()
	a.BeatNow()
	log.Info("Peered", "node", node.Name)
	return &api.InstructionPayload{Kind: api.PayloadPeer, VirtualNodeNames: []string{node.Name}, ResourceSliceNames: []string{sliceName(res)}}, nil
}

// ensureSecret stores kubeconfig in kubeconfig-<res> and returns the
// credential to use (the stored one when the instruction carries none).
func (a *Agent) ensureSecret(ctx context.Context, res, prov, kubeconfig string) (string, error) {
	key := client.ObjectKey{Namespace: a.cfg.Namespace, Name: secretName(res)}
	var s corev1.Secret
	err := a.cfg.Client.Get(ctx, key, &s)
	switch {
	case apierrors.IsNotFound(err):
		if kubeconfig == "" {
			return "", api.Errorf(api.CodeInvalidRequest, "Peer for %s carries no kubeconfig and none is stored", res)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{
				fav1alpha1.ReservationLabel:         res,
				"federation-autoscaler.io/provider": prov,
			}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{kubeconfigKey: []byte(kubeconfig)},
		}
		if err := a.cfg.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("storing the peering credential in Secret %s: %w", key, err)
		}
		return kubeconfig, nil
	case err != nil:
		return "", fmt.Errorf("reading Secret %s: %w", key, err)
	}
	if kubeconfig == "" {
		return string(s.Data[kubeconfigKey]), nil
	}
	if string(s.Data[kubeconfigKey]) != kubeconfig {
		s.Data = map[string][]byte{kubeconfigKey: []byte(kubeconfig)}
		if err := a.cfg.Client.Update(ctx, &s); err != nil {
			return "", fmt.Errorf("updating Secret %s: %w", key, err)
		}
	}
	return kubeconfig, nil
}

// ensureSlice makes sure rs-<res> exists in the provider's tenant namespace
// (which the peering created) with liqo.EnsureResourceSlice: read first,
// create only when absent, since Liqo's webhook forbids a second Create.
func (a *Agent) ensureSlice(ctx context.Context, res, provLiqo string, resources corev1.ResourceList) error {
	rs := liqo.NewResourceSlice(sliceName(res), liqo.TenantNamespace(provLiqo), a.cfg.LiqoClusterID, provLiqo, resources)
	rs.Labels[fav1alpha1.ReservationLabel] = res
	return liqo.EnsureResourceSlice(ctx, a.cfg.Client, rs)
}

// ensureVNS creates vns-<res> in phase Creating.
func (a *Agent) ensureVNS(ctx context.Context, res, prov, provLiqo, ngID string, resources corev1.ResourceList) error {
	v := &fav1alpha1.VirtualNodeState{
		ObjectMeta: metav1.ObjectMeta{Name: fav1alpha1.VirtualNodeStateName(res), Namespace: a.cfg.Namespace,
			Labels: map[string]string{fav1alpha1.ReservationLabel: res}},
		Spec: fav1alpha1.VirtualNodeStateSpec{
			ProviderClusterID: prov, ProviderLiqoClusterID: provLiqo, ResourceSliceName: sliceName(res),
			NodeGroupID: ngID, ReservationID: res, Resources: resources.DeepCopy(),
		},
	}
	err := a.cfg.Client.Create(ctx, v)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating VirtualNodeState %s: %w", v.Name, err)
	}
	now := metav1.NewTime(a.cfg.Clock.Now())
	v.Status = fav1alpha1.VirtualNodeStateStatus{Phase: fav1alpha1.VirtualNodeCreating, ResourceSliceName: sliceName(res),
		LastTransitionTime: &now, Message: "waiting for the virtual node"}
	if err := a.cfg.Client.Status().Update(ctx, v); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("initialising the status of VirtualNodeState %s: %w", v.Name, err)
	}
	return nil
}

// waitForNode waits for the Node named name in the projector's cache.
func (a *Agent) waitForNode(ctx context.Context, name string) (*corev1.Node, error) {
	deadline := a.cfg.Clock.Now().Add(a.cfg.NodeWait)
	// The cache is in memory; 50 ms polling costs nothing and keeps the
	// Peer latency low.
	t := a.cfg.Clock.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if n := a.proj.node(name); n != nil {
			return n, nil
		}
		if a.cfg.Clock.Now().After(deadline) {
			return nil, fmt.Errorf("virtual node %s did not appear within %s", name, a.cfg.NodeWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C():
		}
	}
}

// ensureProviderID sets spec.providerID on a virtual node that has none
// (Liqo sets none; it can be set once).
func (a *Agent) ensureProviderID(ctx context.Context, n *corev1.Node, id string) error {
	if n.Spec.ProviderID != "" {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"providerID":%q}}`, id)
	if _, err := a.cfg.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting providerID of node %s: %w", n.Name, err)
	}
	return nil
}

// handleUnpeer removes the chunk and, on the last chunk of the provider,
// the peering.
func (a *Agent) handleUnpeer(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
	if _, err := a.handleCleanup(ctx, in); err != nil {
		return nil, err
	}
	return &api.InstructionPayload{Kind: api.PayloadUnpeer, ReleasedChunks: max(in.ChunkCount, 1), TunnelDropped: in.LastChunk}, nil
}

// handleCleanup is Unpeer without a payload (the provider-loss and
// terminal paths).
func (a *Agent) handleCleanup(ctx context.Context, in api.InstructionView) (*api.InstructionPayload, error) {
	if err := checkReservationID(in.ReservationID); err != nil {
		return nil, err
	}
	if err := a.removeLocal(ctx, in.ReservationID, in.ProviderLiqoClusterID, in.LastChunk); err != nil {
		return nil, err
	}
	a.BeatNow()
	return nil, nil
}

// removeLocal deletes the VirtualNodeState, the ResourceSlice and the
// virtual node of reservation res; with unpeer it also tears the peering
// down. The Secret is always deleted last. Missing objects are fine.
func (a *Agent) removeLocal(ctx context.Context, res, provLiqo string, unpeer bool) error {
	a.held.Delete(res)
	var errs []error
	vnsKey := client.ObjectKey{Namespace: a.cfg.Namespace, Name: fav1alpha1.VirtualNodeStateName(res)}
	var v fav1alpha1.VirtualNodeState
	slice := sliceName(res)
	switch err := a.cfg.Client.Get(ctx, vnsKey, &v); {
	case err == nil:
		if provLiqo == "" {
			provLiqo = v.Spec.ProviderLiqoClusterID
		}
		if v.Spec.ResourceSliceName != "" {
			slice = v.Spec.ResourceSliceName
		}
		if v.Status.Phase != fav1alpha1.VirtualNodeDeleting {
			now := metav1.NewTime(a.cfg.Clock.Now())
			v.Status.Phase, v.Status.LastTransitionTime, v.Status.Message = fav1alpha1.VirtualNodeDeleting, &now, "releasing the chunk"
			_ = a.cfg.Client.Status().Update(ctx, &v) // best effort: the object goes next
		}
		if err := a.cfg.Client.Delete(ctx, &v); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting VirtualNodeState %s: %w", vnsKey, err))
		}
	case !apierrors.IsNotFound(err):
		errs = append(errs, fmt.Errorf("reading VirtualNodeState %s: %w", vnsKey, err))
	}
	if provLiqo != "" {
		rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: slice, Namespace: liqo.TenantNamespace(provLiqo)}}
		if err := a.cfg.Client.Delete(ctx, rs); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting ResourceSlice %s/%s: %w", rs.Namespace, rs.Name, err))
		}
	}
	if err := a.deleteVirtualNode(ctx, slice, provLiqo); err != nil {
		errs = append(errs, err)
	}
	secKey := client.ObjectKey{Namespace: a.cfg.Namespace, Name: secretName(res)}
	if unpeer && provLiqo != "" {
		var s corev1.Secret
		kc := ""
		if err := a.cfg.Client.Get(ctx, secKey, &s); err == nil {
			kc = string(s.Data[kubeconfigKey])
		}
		if err := a.cfg.Driver.Unpeer(ctx, provLiqo, kc); err != nil {
			// Keep the Secret: Unpeer needs it on the retry.
			return errors.Join(append(errs, fmt.Errorf("unpeering from %s: %w", provLiqo, err))...)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secKey.Name, Namespace: secKey.Namespace}}
	if err := a.cfg.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Secret %s: %w", secKey, err))
	}
	a.proj.kick()
	return errors.Join(errs...)
}

// deleteVirtualNode removes the virtual node name of provider provLiqo.
// Liqo's virtual kubelet re-creates a missing Node as long as its
// VirtualNode exists, so the VirtualNode (same name, tenant namespace) is
// deleted and Liqo removes the Node with it; the Node itself is deleted only
// when no VirtualNode is left to own it (an orphan), and never when it is not
// a Liqo virtual node (a real node that happens to share the name).
func (a *Agent) deleteVirtualNode(ctx context.Context, name, provLiqo string) error {
	if provLiqo != "" {
		vn := &offloadingv1beta1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: liqo.TenantNamespace(provLiqo)}}
		switch err := a.cfg.Client.Delete(ctx, vn); {
		case err == nil:
			return nil // Liqo deletes the Node once the VirtualNode is gone
		case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
			return fmt.Errorf("deleting VirtualNode %s/%s: %w", vn.Namespace, vn.Name, err)
		}
	}
	n, err := a.cfg.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	if n.Labels[liqo.TypeLabel] != liqo.VirtualNodeType {
		return nil
	}
	if err := a.cfg.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting virtual node %s: %w", name, err)
	}
	return nil
}
