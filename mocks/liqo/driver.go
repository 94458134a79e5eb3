package liqosim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// TenantNamespaceLabel marks Liqo tenant namespaces (Liqo's own label).
const TenantNamespaceLabel = "liqo.io/tenant-namespace"

// DriverOptions configures a Driver.
type DriverOptions struct {
	// LocalClusterID is this cluster's Liqo cluster id, named in the
	// kubeconfigs GeneratePeeringUser returns (default "liqo-sim").
	LocalClusterID string
	// Server is the API server URL written into those kubeconfigs (default
	// https://<LocalClusterID>.liqo-sim.invalid:6443; nothing dials it).
	Server string
	// Logger receives one line per operation.
	Logger *slog.Logger
}

// UnpeerSettle bounds how long Unpeer waits for the provider's VirtualNodes
// to be gone before it deletes the ForeignCluster (liqoctl unpeer waits
// for the teardown too); past it, the ForeignCluster is kept and Unpeer
// answers the retryable error of liqo.DeleteForeignClusters.
const UnpeerSettle = 30 * time.Second

// Driver is the simulated liqo.Driver. It needs a client with the Liqo
// kinds and core/v1 in its scheme (see AddToScheme).
type Driver struct {
	c    client.Client
	opts DriverOptions
	log  *slog.Logger
}

var _ liqo.Driver = (*Driver)(nil)

// NewDriver returns a simulated Liqo driver acting on the cluster behind c.
func NewDriver(c client.Client, opts DriverOptions) *Driver {
	if opts.LocalClusterID == "" {
		opts.LocalClusterID = "liqo-sim"
	}
	if opts.Server == "" {
		opts.Server = "https://" + opts.LocalClusterID + ".liqo-sim.invalid:6443"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{c: c, opts: opts, log: log.With("component", "liqo-sim")}
}

// GeneratePeeringUser returns a kubeconfig naming the consumer's peering
// user on this cluster. It holds no credential: nothing checks it.
func (d *Driver) GeneratePeeringUser(ctx context.Context, consumerLiqoClusterID string) (string, error) {
	if err := liqo.CheckClusterID("consumer Liqo cluster id", consumerLiqoClusterID); err != nil {
		return "", err
	}
	user := "liqo-peering-" + consumerLiqoClusterID
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[d.opts.LocalClusterID] = &clientcmdapi.Cluster{Server: d.opts.Server}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: d.opts.LocalClusterID, AuthInfo: user, Namespace: liqo.TenantNamespace(consumerLiqoClusterID)}
	cfg.CurrentContext = user
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", fmt.Errorf("rendering the simulated peering kubeconfig: %w", err)
	}
	d.log.InfoContext(ctx, "Generated simulated peering user", "consumerLiqoClusterID", consumerLiqoClusterID)
	return strings.TrimSpace(string(out)), nil
}

// DeletePeeringUser succeeds: the simulated peering user has no state.
func (d *Driver) DeletePeeringUser(ctx context.Context, consumerLiqoClusterID string) error {
	if err := liqo.CheckClusterID("consumer Liqo cluster id", consumerLiqoClusterID); err != nil {
		return err
	}
	d.log.InfoContext(ctx, "Deleted simulated peering user", "consumerLiqoClusterID", consumerLiqoClusterID)
	return nil
}

// Peer checks that kubeconfig is a kubeconfig, ensures the tenant namespace
// liqo-tenant-<provider> and records the peering as the ForeignCluster
// <provider> (role Provider, modules enabled). It creates no ResourceSlice.
func (d *Driver) Peer(ctx context.Context, providerLiqoClusterID, kubeconfig string) error {
	if err := liqo.CheckClusterID("provider Liqo cluster id", providerLiqoClusterID); err != nil {
		return err
	}
	kc, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return fmt.Errorf("peering with %s: the provider's kubeconfig does not parse: %w", providerLiqoClusterID, err)
	}
	if len(kc.Clusters) == 0 {
		return fmt.Errorf("peering with %s: the provider's kubeconfig names no cluster", providerLiqoClusterID)
	}
	tenant := liqo.TenantNamespace(providerLiqoClusterID)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: map[string]string{
		TenantNamespaceLabel:      "true",
		liqo.RemoteClusterIDLabel: providerLiqoClusterID,
	}}}
	if err := d.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating tenant namespace %s: %w", tenant, err)
	}
	fc := &liqocorev1beta1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: providerLiqoClusterID, Labels: map[string]string{liqo.RemoteClusterIDLabel: providerLiqoClusterID}},
		Spec:       liqocorev1beta1.ForeignClusterSpec{ClusterID: liqocorev1beta1.ClusterID(providerLiqoClusterID)},
	}
	if err := d.c.Create(ctx, fc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recording the peering with %s as a ForeignCluster: %w", providerLiqoClusterID, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &liqocorev1beta1.ForeignCluster{}
		if err := d.c.Get(ctx, client.ObjectKey{Name: providerLiqoClusterID}, live); err != nil {
			return err
		}
		want := peeredStatus(tenant, kc.Clusters)
		if live.Status.Role == want.Role && live.Status.TenantNamespace == want.TenantNamespace && live.Status.Modules.Offloading.Enabled {
			return nil
		}
		live.Status = want
		return d.c.Status().Update(ctx, live)
	})
	if err != nil {
		return fmt.Errorf("updating ForeignCluster %s status: %w", providerLiqoClusterID, err)
	}
	d.log.InfoContext(ctx, "Peered (simulated)", "providerLiqoClusterID", providerLiqoClusterID)
	return nil
}

func peeredStatus(tenant string, clusters map[string]*clientcmdapi.Cluster) liqocorev1beta1.ForeignClusterStatus {
	var server string
	for _, c := range clusters {
		server = c.Server
		break
	}
	on := liqocorev1beta1.Module{Enabled: true}
	return liqocorev1beta1.ForeignClusterStatus{
		Role:            liqocorev1beta1.ProviderRole,
		APIServerURL:    server,
		TenantNamespace: liqocorev1beta1.TenantNamespaceType{Local: tenant},
		Modules:         liqocorev1beta1.Modules{Networking: on, Authentication: on, Offloading: on},
	}
}

// Unpeer deletes the provider's ResourceSlices and VirtualNodes (in its
// tenant namespace), its virtual Nodes and its ForeignCluster. The tenant
// namespace is kept: without a namespace controller its deletion would
// never finish and would block a later peering. kubeconfig is unused.
func (d *Driver) Unpeer(ctx context.Context, providerLiqoClusterID, _ string) error {
	if err := liqo.CheckClusterID("provider Liqo cluster id", providerLiqoClusterID); err != nil {
		return err
	}
	tenant := liqo.TenantNamespace(providerLiqoClusterID)
	var slices authv1beta1.ResourceSliceList
	if err := d.c.List(ctx, &slices, client.InNamespace(tenant)); err != nil {
		return fmt.Errorf("listing ResourceSlices of %s: %w", providerLiqoClusterID, err)
	}
	for i := range slices.Items {
		if err := d.c.Delete(ctx, &slices.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ResourceSlice %s/%s: %w", tenant, slices.Items[i].Name, err)
		}
	}
	var vns offloadingv1beta1.VirtualNodeList
	if err := d.c.List(ctx, &vns, client.InNamespace(tenant)); err != nil {
		return fmt.Errorf("listing VirtualNodes of %s: %w", providerLiqoClusterID, err)
	}
	for i := range vns.Items {
		if err := d.c.Delete(ctx, &vns.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting VirtualNode %s/%s: %w", tenant, vns.Items[i].Name, err)
		}
	}
	var nodes corev1.NodeList
	if err := d.c.List(ctx, &nodes, client.MatchingLabels{liqo.TypeLabel: liqo.VirtualNodeType, liqo.RemoteClusterIDLabel: providerLiqoClusterID}); err != nil {
		return fmt.Errorf("listing virtual nodes of %s: %w", providerLiqoClusterID, err)
	}
	for i := range nodes.Items {
		if err := d.c.Delete(ctx, &nodes.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting virtual node %s: %w", nodes.Items[i].Name, err)
		}
	}
	// As liqoctl unpeer does, wait for the tenant's teardown to take effect
	// (the simulated Liqo's controllers finish the deletions, a slice's
	// reconcile in flight may write its VirtualNode once more) before the
	// ForeignCluster goes: it is kept while VirtualNodes of it remain.
	var left int
	settled := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, UnpeerSettle, true, func(ctx context.Context) (bool, error) {
		// A failed list or delete is retried until the deadline.
		var vns offloadingv1beta1.VirtualNodeList
		if d.c.List(ctx, &vns, client.InNamespace(tenant)) != nil {
			return false, nil
		}
		for i := range vns.Items {
			if vns.Items[i].DeletionTimestamp == nil {
				_ = d.c.Delete(ctx, &vns.Items[i])
			}
		}
		left = len(vns.Items)
		return left == 0, nil
	})
	if settled != nil {
		d.log.WarnContext(ctx, "Unpeer (simulated): VirtualNodes of the provider remain", "providerLiqoClusterID", providerLiqoClusterID, "left", left, "waited", UnpeerSettle)
	}
	if err := liqo.DeleteForeignClusters(ctx, d.c, providerLiqoClusterID); err != nil {
		return err
	}
	d.log.InfoContext(ctx, "Unpeered (simulated)", "providerLiqoClusterID", providerLiqoClusterID,
		"resourceSlices", len(slices.Items), "virtualNodes", len(vns.Items), "nodes", len(nodes.Items))
	return nil
}
