package liqosim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	authv1beta1 "github.com/liqotech/liqo/apis/authentication/v1beta1"
	liqocorev1beta1 "github.com/liqotech/liqo/apis/core/v1beta1"
	offloadingv1beta1 "github.com/liqotech/liqo/apis/offloading/v1beta1"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// SliceAnnotation on a simulated virtual Node names the ResourceSlice
// ("<namespace>/<name>") it was built for.
const SliceAnnotation = "liqosim.federation-autoscaler.io/resource-slice"

// DefaultPods is the pod capacity given to a virtual node whose slice asks
// for none.
const DefaultPods = 110

// Condition reasons the simulation writes on ResourceSlices.
const (
	ReasonAccepted      = "SimAccepted"
	ReasonBadLabels     = "InvalidLabels"
	ReasonNotPeered     = "NotPeered"
	ReasonNoResources   = "NoResources"
	ReasonNotAuthorized = "NotAuthenticated"
)

// AddToScheme adds the kinds the simulation reads and writes: core/v1 and
// Liqo's ForeignCluster, ResourceSlice and VirtualNode.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		authv1beta1.AddToScheme,
		liqocorev1beta1.AddToScheme,
		offloadingv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// ControllerOptions configures a Controller.
type ControllerOptions struct {
	// NodeDelay is how long after a slice is accepted the VirtualNode and
	// the Node appear (Liqo's virtual kubelet start-up); 0 means at once.
	NodeDelay time.Duration
	// Clock is the time source (default: the real clock).
	Clock clock.Clock
	// Logger receives the controller's logs (default: discarded).
	Logger *slog.Logger
	// Name tells several simulations in one process apart in logs and
	// metrics (default "liqo-sim").
	Name string
}

// Controller is the simulated Liqo virtual-node machinery of one cluster.
type Controller struct {
	mgr manager.Manager
	r   *reconciler
}

// NewController prepares a simulation against the cluster cfg points at. It
// needs the Liqo CRDs installed there (mocks/liqo/crds.Install on a cluster
// without Liqo) and permissions for ResourceSlices (and their status),
// VirtualNodes, ForeignClusters and Nodes. Call Run to start it.
func NewController(cfg *rest.Config, opts ControllerOptions) (*Controller, error) {
	if opts.NodeDelay < 0 {
		return nil, fmt.Errorf("liqo sim: NodeDelay %s is negative", opts.NodeDelay)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = "liqo-sim"
	}
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("liqo sim: building the scheme: %w", err)
	}
	log := opts.Logger.With("component", "liqo-sim", "sim", opts.Name)
	virtualNodes := labels.SelectorFromSet(labels.Set{liqo.TypeLabel: liqo.VirtualNodeType})
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(log.Handler()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Label: virtualNodes}, // only virtual nodes are cached
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("liqo sim: creating the controller manager: %w", err)
	}
	r := &reconciler{
		c:          mgr.GetClient(),
		delay:      opts.NodeDelay,
		clock:      opts.Clock,
		log:        log,
		acceptedAt: map[types.NamespacedName]time.Time{},
	}
	err = builder.ControllerManagedBy(mgr).
		Named(opts.Name).
		For(&authv1beta1.ResourceSlice{}).
		Watches(&offloadingv1beta1.VirtualNode{}, handler.EnqueueRequestsFromMapFunc(sameKey)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(sliceOfNode)).
		Watches(&liqocorev1beta1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(r.slicesOfProvider)).
		// The classic rate-limited queue, not controller-runtime v0.23's
		// priority queue (its default): that one can deadlock on shutdown
		// (kubernetes-sigs/controller-runtime#3538, fixed in v0.25), and a
		// Stop must never hang on it (TestStopWhileReconciling).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("liqo sim: building the controller: %w", err)
	}
	return &Controller{mgr: mgr, r: r}, nil
}

// Run runs the simulation until ctx ends. It returns nil on a clean stop.
// A Controller runs once; build a new one to run again.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("liqo sim: %w", err)
	}
	return nil
}

func sameKey(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

func sliceOfNode(_ context.Context, o client.Object) []reconcile.Request {
	key, ok := parseKey(o.GetAnnotations()[SliceAnnotation])
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

func (r *reconciler) slicesOfProvider(ctx context.Context, o client.Object) []reconcile.Request {
	fc, ok := o.(*liqocorev1beta1.ForeignCluster)
	if !ok {
		return nil
	}
	id := string(fc.Spec.ClusterID)
	if id == "" {
		id = fc.Name
	}
	var slices authv1beta1.ResourceSliceList
	if err := r.c.List(ctx, &slices, client.InNamespace(liqo.TenantNamespace(id))); err != nil {
		r.log.ErrorContext(ctx, "Listing the slices of a provider failed", "provider", id, "error", err)
		return nil
	}
	out := make([]reconcile.Request, 0, len(slices.Items))
	for i := range slices.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&slices.Items[i])})
	}
	return out
}

func parseKey(s string) (types.NamespacedName, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if i == 0 || i == len(s)-1 {
				return types.NamespacedName{}, false
			}
			return types.NamespacedName{Namespace: s[:i], Name: s[i+1:]}, true
		}
	}
	return types.NamespacedName{}, false
}

type reconciler struct {
	c     client.Client
	delay time.Duration
	clock clock.Clock
	log   *slog.Logger

	mu sync.Mutex
	// acceptedAt keeps the precise acceptance time of each slice (the
	// condition's lastTransitionTime has whole seconds only); after a
	// restart the condition time is used.
	acceptedAt map[types.NamespacedName]time.Time
}

// Reconcile makes the virtual node of one ResourceSlice match the slice:
//  1. slice gone or deleting → remove its VirtualNode and Node;
//  2. judge it (labels, peering, resources) and write the conditions;
//  3. not accepted, or no virtual node asked for → remove them;
//  4. accepted less than NodeDelay ago → come back later;
//  5. ensure the VirtualNode and the Ready Node.
//
// A benign conflict (an object created by an earlier pass that the cache
// had not seen yet, an update on a stale resourceVersion) is retried at
// shortly (conflictRetry) and logged at debug: it is how controllers
// work, not an error.
// conflictRetry is the wait before reconciling a slice again after a
// benign conflict: long enough for the cache to catch up, short enough not
// to slow a peering down.
const conflictRetry = 50 * time.Millisecond

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
		r.log.DebugContext(ctx, "Benign conflict; reconciling again", "slice", req.String(), "err", err)
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

func (r *reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rs := &authv1beta1.ResourceSlice{}
	err := r.c.Get(ctx, req.NamespacedName, rs)
	if apierrors.IsNotFound(err) || (err == nil && rs.DeletionTimestamp != nil) {
		return reconcile.Result{}, r.removeVirtualNode(ctx, req.NamespacedName)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("getting ResourceSlice %s: %w", req.NamespacedName, err)
	}

	provider, accepted, err := r.judge(ctx, rs)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !accepted || !liqo.WantsVirtualNode(rs) {
		return reconcile.Result{}, r.removeVirtualNode(ctx, req.NamespacedName)
	}

	if wait := r.acceptedTime(req.NamespacedName, rs).Add(r.delay).Sub(r.clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.ensureVirtualNode(ctx, rs, provider); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.ensureNode(ctx, rs, provider)
}

// judge sets the slice's Authentication and Resources conditions (and
// status.resources) from its labels, the peering and its resources, and
// reports whether both are Accepted.
func (r *reconciler) judge(ctx context.Context, rs *authv1beta1.ResourceSlice) (provider string, accepted bool, err error) {
	provider = rs.Labels[liqo.RemoteClusterIDLabel]
	auth := cond(authv1beta1.ResourceSliceConditionTypeAuthentication, authv1beta1.ResourceSliceConditionAccepted, ReasonAccepted, "")
	res := cond(authv1beta1.ResourceSliceConditionTypeResources, authv1beta1.ResourceSliceConditionAccepted, ReasonAccepted, "")
	if bad := liqo.CheckResourceSlice(rs); bad != nil {
		auth = cond(auth.Type, authv1beta1.ResourceSliceConditionDenied, ReasonBadLabels, bad.Error())
	} else {
		fc := &liqocorev1beta1.ForeignCluster{}
		err := r.c.Get(ctx, client.ObjectKey{Name: provider}, fc)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && fc.DeletionTimestamp != nil):
			auth = cond(auth.Type, authv1beta1.ResourceSliceConditionDenied, ReasonNotPeered, "no peering with provider "+provider)
		case err != nil:
			return "", false, fmt.Errorf("getting ForeignCluster %s: %w", provider, err)
		}
	}
	switch {
	case auth.Status != authv1beta1.ResourceSliceConditionAccepted:
		res = cond(res.Type, authv1beta1.ResourceSliceConditionDenied, ReasonNotAuthorized, "authentication was denied")
	case len(rs.Spec.Resources) == 0:
		res = cond(res.Type, authv1beta1.ResourceSliceConditionDenied, ReasonNoResources, "spec.resources is empty")
	}
	accepted = auth.Status == authv1beta1.ResourceSliceConditionAccepted && res.Status == authv1beta1.ResourceSliceConditionAccepted

	now := metav1.NewTime(r.clock.Now())
	want := rs.Status.DeepCopy()
	want.Conditions = mergeConditions(want.Conditions, now, auth, res)
	want.Resources = nil
	if accepted {
		want.Resources = rs.Spec.Resources.DeepCopy()
	}
	if equality.Semantic.DeepEqual(want, &rs.Status) {
		return provider, accepted, nil
	}
	key := client.ObjectKeyFromObject(rs)
	rs.Status = *want
	if err := r.c.Status().Update(ctx, rs); err != nil {
		return "", false, fmt.Errorf("updating ResourceSlice %s status: %w", key, err)
	}
	r.mu.Lock()
	if accepted {
		if _, ok := r.acceptedAt[key]; !ok {
			r.acceptedAt[key] = now.Time
		}
	} else {
		delete(r.acceptedAt, key)
	}
	r.mu.Unlock()
	r.log.InfoContext(ctx, "Judged ResourceSlice", "slice", key.String(), "accepted", accepted,
		"authentication", auth.Reason, "resources", res.Reason, "message", auth.Message+res.Message)
	return provider, accepted, nil
}

// acceptedTime is when the slice became accepted: the precise time this
// process recorded, else the later of the two conditions' transition times.
func (r *reconciler) acceptedTime(key types.NamespacedName, rs *authv1beta1.ResourceSlice) time.Time {
	r.mu.Lock()
	t, ok := r.acceptedAt[key]
	r.mu.Unlock()
	if ok {
		return t
	}
	for _, c := range rs.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return t
}

func cond(t authv1beta1.ResourceSliceConditionType, s authv1beta1.ResourceSliceConditionStatus, reason, msg string) authv1beta1.ResourceSliceCondition {
	return authv1beta1.ResourceSliceCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

// mergeConditions sets each wanted condition, keeping the transition time
// when the status did not change, and leaves other condition types alone.
func mergeConditions(have []authv1beta1.ResourceSliceCondition, now metav1.Time, want ...authv1beta1.ResourceSliceCondition) []authv1beta1.ResourceSliceCondition {
	for _, w := range want {
		w.LastTransitionTime = now
		found := false
		for i := range have {
			if have[i].Type != w.Type {
				continue
			}
			found = true
			if have[i].Status == w.Status {
				w.LastTransitionTime = have[i].LastTransitionTime
			}
			have[i] = w
		}
		if !found {
			have = append(have, w)
		}
	}
	return have
}

func (r *reconciler) ensureVirtualNode(ctx context.Context, rs *authv1beta1.ResourceSlice, provider string) error {
	key := client.ObjectKeyFromObject(rs)
	vn := &offloadingv1beta1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: rs.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.c, vn, func() error {
		if vn.Labels == nil {
			vn.Labels = map[string]string{}
		}
		vn.Labels[liqo.RemoteClusterIDLabel] = provider
		vn.Spec.ClusterID = liqocorev1beta1.ClusterID(provider)
		vn.Spec.CreateNode = ptr.To(true)
		vn.Spec.ResourceQuota.Hard = rs.Spec.Resources.DeepCopy()
		// A controller reference without blockOwnerDeletion: setting that
		// needs extra permissions where OwnerReferencesPermissionEnforcement
		// is on, and nothing here relies on foreground deletion.
		vn.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: authv1beta1.GroupVersion.String(),
			Kind:       authv1beta1.ResourceSliceKind,
			Name:       rs.Name,
			UID:        rs.UID,
			Controller: ptr.To(true),
		}}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ensuring VirtualNode %s: %w", key, err)
	}
	if op != controllerutil.OperationResultNone {
		r.log.InfoContext(ctx, "VirtualNode "+string(op), "virtualNode", key.String(), "provider", provider)
	}
	running := []offloadingv1beta1.VirtualNodeCondition{
		{Type: offloadingv1beta1.VirtualKubeletConditionType, Status: offloadingv1beta1.RunningConditionStatusType},
		{Type: offloadingv1beta1.NodeConditionType, Status: offloadingv1beta1.RunningConditionStatusType},
	}
	if sameVNConditions(vn.Status.Conditions, running) {
		return nil
	}
	now := metav1.NewTime(r.clock.Now())
	for i := range running {
		running[i].LastTransitionTime = now
	}
	vn.Status.Conditions = running
	if err := r.c.Status().Update(ctx, vn); err != nil {
		return fmt.Errorf("updating VirtualNode %s status: %w", key, err)
	}
	return nil
}

func sameVNConditions(have, want []offloadingv1beta1.VirtualNodeCondition) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i].Type != want[i].Type || have[i].Status != want[i].Status {
			return false
		}
	}
	return true
}

// nodeResources is the slice's resources plus a pod capacity.
func nodeResources(rs *authv1beta1.ResourceSlice) corev1.ResourceList {
	out := rs.Spec.Resources.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	if _, ok := out[corev1.ResourcePods]; !ok {
		out[corev1.ResourcePods] = *resource.NewQuantity(DefaultPods, resource.DecimalSI)
	}
	return out
}

// ensureNode creates the virtual Node or brings the fields the simulation
// owns back in line: labels, taint, annotation, capacity, allocatable and
// the Ready condition. It never touches spec.providerID.
func (r *reconciler) ensureNode(ctx context.Context, rs *authv1beta1.ResourceSlice, provider string) error {
	key := client.ObjectKeyFromObject(rs)
	res := nodeResources(rs)
	node := &corev1.Node{}
	err := r.c.Get(ctx, client.ObjectKey{Name: rs.Name}, node)
	if apierrors.IsNotFound(err) {
		// The cache holds only virtual nodes: a real Node of that name
		// would not be seen here, but Create reports the clash.
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: rs.Name}}
		r.applyNodeSpec(node, key, provider)
		node.Status = r.nodeStatus(res, nil)
		if err := r.c.Create(ctx, node); err != nil {
			return fmt.Errorf("creating virtual node %s for slice %s: %w", rs.Name, key, err)
		}
		r.log.InfoContext(ctx, "Virtual node created", "node", rs.Name, "slice", key.String(), "provider", provider)
		// node now holds the server's answer; an API server that drops the
		// status on create gets it below.
	} else if err != nil {
		return fmt.Errorf("getting virtual node %s: %w", rs.Name, err)
	}
	if owner := node.Annotations[SliceAnnotation]; owner != key.String() {
		return fmt.Errorf("node %s belongs to %q, not to slice %s: rename the slice", node.Name, owner, key)
	}
	before := node.DeepCopy()
	r.applyNodeSpec(node, key, provider)
	if !equality.Semantic.DeepEqual(before.ObjectMeta, node.ObjectMeta) || !equality.Semantic.DeepEqual(before.Spec, node.Spec) {
		if err := r.c.Update(ctx, node); err != nil {
			return fmt.Errorf("updating virtual node %s: %w", node.Name, err)
		}
	}
	want := r.nodeStatus(res, &node.Status)
	if !equality.Semantic.DeepEqual(want, node.Status) {
		node.Status = want
		if err := r.c.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("updating virtual node %s status: %w", node.Name, err)
		}
	}
	return nil
}

// applyNodeSpec sets Liqo's labels, the owner annotation and the virtual
// node taint, and drops the not-ready taint the TaintNodesByCondition
// admission plugin adds at creation (the node is Ready from the start).
func (r *reconciler) applyNodeSpec(node *corev1.Node, key types.NamespacedName, provider string) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		liqo.TypeLabel:            liqo.VirtualNodeType,
		liqo.RemoteClusterIDLabel: provider,
		corev1.LabelHostname:      node.Name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"node.kubernetes.io/exclude-from-external-load-balancers": "true",
	} {
		node.Labels[k] = v
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[SliceAnnotation] = key.String()
	taints := make([]corev1.Taint, 0, len(node.Spec.Taints)+1)
	hasVK := false
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			continue
		}
		if t.Key == liqo.VirtualNodeTaintKey {
			hasVK = true
			t.Value, t.Effect = "true", corev1.TaintEffectNoExecute
		}
		taints = append(taints, t)
	}
	if !hasVK {
		taints = append(taints, corev1.Taint{Key: liqo.VirtualNodeTaintKey, Value: "true", Effect: corev1.TaintEffectNoExecute})
	}
	node.Spec.Taints = taints
}

// nodeStatus is the status of a Ready virtual node with the given
// resources; the transition times of have are kept when unchanged.
func (r *reconciler) nodeStatus(res corev1.ResourceList, have *corev1.NodeStatus) corev1.NodeStatus {
	now := metav1.NewTime(r.clock.Now())
	out := corev1.NodeStatus{}
	if have != nil {
		out = *have.DeepCopy()
	}
	out.Capacity = res.DeepCopy()
	out.Allocatable = res.DeepCopy()
	out.NodeInfo.KubeletVersion = "v1.35.4-liqo-sim"
	out.NodeInfo.OperatingSystem = "linux"
	out.NodeInfo.Architecture = "amd64"
	want := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated Liqo virtual kubelet is ready"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for i := range want {
		want[i].LastTransitionTime, want[i].LastHeartbeatTime = now, now
		for _, h := range out.Conditions {
			if h.Type == want[i].Type && h.Status == want[i].Status && h.Reason == want[i].Reason {
				want[i].LastTransitionTime, want[i].LastHeartbeatTime = h.LastTransitionTime, h.LastHeartbeatTime
			}
		}
	}
	out.Conditions = want
	return out
}

// removeVirtualNode deletes the VirtualNode and the Node of a slice.
func (r *reconciler) removeVirtualNode(ctx context.Context, key types.NamespacedName) error {
	r.mu.Lock()
	delete(r.acceptedAt, key)
	r.mu.Unlock()
	vn := &offloadingv1beta1.VirtualNode{}
	err := r.c.Get(ctx, key, vn)
	switch {
	case err == nil:
		if err := r.c.Delete(ctx, vn); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting VirtualNode %s: %w", key, err)
		}
		r.log.InfoContext(ctx, "VirtualNode deleted", "virtualNode", key.String())
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting VirtualNode %s: %w", key, err)
	}
	node := &corev1.Node{}
	err = r.c.Get(ctx, client.ObjectKey{Name: key.Name}, node)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("getting virtual node %s: %w", key.Name, err)
	case node.Annotations[SliceAnnotation] != key.String():
		return nil // not ours
	}
	if err := r.c.Delete(ctx, node, client.Preconditions{UID: &node.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting virtual node %s: %w", key.Name, err)
	}
	r.log.InfoContext(ctx, "Virtual node deleted", "node", key.Name, "slice", key.String())
	return nil
}
