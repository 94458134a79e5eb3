package consolidate

// This file is the make-before-break step of a move (docs/placement.md,
// Consolidation): once the better group's room is Ready, the pods on the
// worse group's nodes whose controller can be surged are replaced before
// anything stops. The worse nodes are tainted NoSchedule (TaintMoving) so
// no new pod lands there; each pod there is given the lowest
// controller.kubernetes.io/pod-deletion-cost; its owner (the Deployment
// of its ReplicaSet, or the ReplicaSet) is scaled up by the number of its
// pods there; once the owner has that many more available replicas
// (elsewhere: the taint), it is scaled back, and the ReplicaSet
// controller deletes the lowest-cost pods: the worse nodes' ones. The
// worse nodes are then empty of them, and CA's own scale-down (the
// "drain" role) removes them. Pods whose owner cannot be surged keep
// CA's PodDisruptionBudget-respecting eviction.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Names of the surge.
const (
	// TaintMoving (NoSchedule, value the move's key) is on the worse
	// group's nodes while a move surges or drains: the surged pods, and
	// pods CA evicts, land elsewhere.
	TaintMoving = "consolidation.federation-autoscaler.io/moving"
	// AnnotationSurge on a surged Deployment or ReplicaSet records the
	// surge (a JSON surgeRecord), written in the same update as the
	// replicas, so a restarted agent can undo it.
	AnnotationSurge = "consolidation.federation-autoscaler.io/surge"
	// DeletionCost is the pod-deletion-cost (corev1.PodDeletionCost: the
	// ReplicaSet controller deletes lower-cost pods first on scale-down)
	// the moving pods get: the lowest an int32 has.
	DeletionCost = math.MinInt32
	// DefaultSurgeTimeout bounds the surging phase (Config.SurgeTimeout).
	DefaultSurgeTimeout = 10 * time.Minute
)

// Owner kinds a move surges.
const (
	KindDeployment = "Deployment"
	KindReplicaSet = "ReplicaSet"
)

// Surge is one owner scaled up for a move.
type Surge struct {
	Kind, Namespace, Name string
	// Replicas is the owner's count before the surge; By how many pods
	// of it are on the worse nodes (it runs Replicas+By meanwhile).
	Replicas, By int32
	// Back is set once the owner was scaled back.
	Back bool
}

// surgeRecord is AnnotationSurge's value.
type surgeRecord struct {
	Move     string `json:"move"`
	Replicas int32  `json:"replicas"`
	By       int32  `json:"by"`
}

// owner is a Deployment or ReplicaSet behind the scale the surge changes.
type owner struct {
	kind        string
	meta        *metav1.ObjectMeta
	replicas    *int32
	observedGen int64
	available   int32
	current     int32 // status.replicas
}

// getOwner reads a Deployment or ReplicaSet; update writes back what was
// changed through the owner's fields.
func (c *Consolidator) getOwner(ctx context.Context, kind, ns, name string) (o *owner, update func(context.Context) error, err error) {
	switch kind {
	case KindDeployment:
		return readOwner(ctx, c.cfg.Kube.AppsV1().Deployments(ns), name, func(d *appsv1.Deployment) *owner {
			return newOwner(kind, &d.ObjectMeta, &d.Spec.Replicas, d.Status.ObservedGeneration, d.Status.AvailableReplicas, d.Status.Replicas)
		})
	case KindReplicaSet:
		return readOwner(ctx, c.cfg.Kube.AppsV1().ReplicaSets(ns), name, func(rs *appsv1.ReplicaSet) *owner {
			return newOwner(kind, &rs.ObjectMeta, &rs.Spec.Replicas, rs.Status.ObservedGeneration, rs.Status.AvailableReplicas, rs.Status.Replicas)
		})
	}
	return nil, nil, fmt.Errorf("owner kind %s is not surged", kind)
}

// getUpdater is the part of a typed client readOwner uses.
type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

func readOwner[T any](ctx context.Context, api getUpdater[T], name string, view func(T) *owner) (*owner, func(context.Context) error, error) {
	obj, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return view(obj), func(ctx context.Context) error {
		_, err := api.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	}, nil
}

// newOwner views an object's scale; an unset spec.replicas is the API's
// default, 1.
func newOwner(kind string, meta *metav1.ObjectMeta, replicas **int32, observedGen int64, available, current int32) *owner {
	if *replicas == nil {
		*replicas = new(int32(1))
	}
	return &owner{kind: kind, meta: meta, replicas: *replicas, observedGen: observedGen, available: available, current: current}
}

// ownerKey names an owner.
type ownerKey struct{ kind, namespace, name string }

// classifier finds each moving pod's surgeable owner, caching per pass.
type classifier struct {
	c    *Consolidator
	rs   map[string]*appsv1.ReplicaSet // by namespace/name; nil: gone
	hpas map[string]map[ownerKey]bool  // by namespace: the HPAs' targets
}

// ownerOf returns the owner the surge scales for p, or why p's pods are
// left to CA's eviction: only a ReplicaSet's pods are surged (through
// its Deployment when it has one), and not when a HorizontalPodAutoscaler
// owns the replicas or the Deployment is rolling out.
func (k *classifier) ownerOf(ctx context.Context, p *corev1.Pod) (ownerKey, string, error) {
	ctrl := metav1.GetControllerOf(p)
	if ctrl == nil {
		return ownerKey{}, "no controller", nil
	}
	if ctrl.Kind != KindReplicaSet {
		return ownerKey{}, "controller " + ctrl.Kind + " is not a ReplicaSet", nil
	}
	rs, err := k.replicaSet(ctx, p.Namespace, ctrl.Name)
	if err != nil || rs == nil {
		return ownerKey{}, "its ReplicaSet is gone", err
	}
	if rs.UID != ctrl.UID || rs.DeletionTimestamp != nil {
		return ownerKey{}, "its ReplicaSet is being replaced", nil
	}
	o := ownerKey{KindReplicaSet, rs.Namespace, rs.Name}
	if dc := metav1.GetControllerOf(rs); dc != nil {
		if dc.Kind != KindDeployment {
			return ownerKey{}, "its ReplicaSet's controller " + dc.Kind + " is not a Deployment", nil
		}
		d, err := k.c.cfg.Kube.AppsV1().Deployments(rs.Namespace).Get(ctx, dc.Name, metav1.GetOptions{})
		if err != nil {
			return ownerKey{}, "its Deployment is gone", ignoreNotFound(err)
		}
		if d.Status.ObservedGeneration < d.Generation || d.Spec.Replicas == nil ||
			d.Status.UpdatedReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return ownerKey{}, "its Deployment is rolling out", nil
		}
		o = ownerKey{KindDeployment, d.Namespace, d.Name}
	}
	scaled, err := k.autoscaled(ctx, o)
	if err != nil {
		return ownerKey{}, "", err
	}
	if scaled {
		return ownerKey{}, "a HorizontalPodAutoscaler owns its replicas", nil
	}
	return o, "", nil
}

func (k *classifier) replicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	id := ns + "/" + name
	if rs, ok := k.rs[id]; ok {
		return rs, nil
	}
	rs, err := k.c.cfg.Kube.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		rs, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ReplicaSet %s: %w", id, err)
	}
	k.rs[id] = rs
	return rs, nil
}

// autoscaled reports whether an HPA of o's namespace targets o (a cluster
// that serves no autoscaling/v2 has none).
func (k *classifier) autoscaled(ctx context.Context, o ownerKey) (bool, error) {
	targets, ok := k.hpas[o.namespace]
	if !ok {
		targets = map[ownerKey]bool{}
		list, err := k.c.cfg.Kube.AutoscalingV2().HorizontalPodAutoscalers(o.namespace).List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("listing the HorizontalPodAutoscalers of %s: %w", o.namespace, err)
		}
		if list != nil {
			for _, h := range list.Items {
				targets[ownerKey{h.Spec.ScaleTargetRef.Kind, o.namespace, h.Spec.ScaleTargetRef.Name}] = true
			}
		}
		k.hpas[o.namespace] = targets
	}
	return targets[o], nil
}

// startSurge makes room for real: placeholders deleted, the worse nodes
// tainted, the surgeable owners scaled up (their pods there given the
// lowest deletion cost first). With nothing to surge the move drains at
// once.
func (c *Consolidator) startSurge(ctx context.Context, m Move, w *world, now time.Time) error {
	if err := c.deletePlaceholders(ctx, key(m.From)); err != nil {
		return err
	}
	nodes := w.autoscaled[m.From]
	if err := c.taint(ctx, nodes, key(m.From)); err != nil {
		return err
	}
	moving, err := c.podsOn(ctx, nodes)
	if err != nil {
		return err
	}
	k := &classifier{c: c, rs: map[string]*appsv1.ReplicaSet{}, hpas: map[string]map[ownerKey]bool{}}
	by := map[ownerKey][]*corev1.Pod{}
	var order []ownerKey
	left := 0
	for _, p := range moving {
		o, why, err := k.ownerOf(ctx, p)
		if err != nil {
			return err
		}
		if why != "" {
			left++
			c.log.Info("Consolidation: pod left to the Cluster Autoscaler's eviction (PodDisruptionBudgets apply)", "pod", p.Namespace+"/"+p.Name, "why", why)
			continue
		}
		if by[o] == nil {
			order = append(order, o)
		}
		by[o] = append(by[o], p)
	}
	var surges []Surge
	var errs []error
	for _, o := range order {
		s, err := c.surge(ctx, o, by[o], key(m.From))
		if err != nil {
			errs = append(errs, err)
			left += len(by[o])
			continue
		}
		surges = append(surges, s)
	}
	c.mu.Lock()
	if cur := c.moves[m.From]; cur != nil {
		cur.Surges = surges
		cur.Phase, cur.PhaseAt = PhaseSurging, now
		if len(surges) == 0 {
			cur.Phase = PhaseDraining
		}
	}
	c.mu.Unlock()
	c.log.Info("Consolidation: the better group has room; surging the workloads on the worse one before anything stops", "from", m.From, "to", m.To, "owners", len(surges), "evicted by CA", left)
	return errors.Join(errs...)
}

// surge gives pods the lowest deletion cost and scales their owner up by
// their number.
func (c *Consolidator) surge(ctx context.Context, o ownerKey, pods []*corev1.Pod, move string) (Surge, error) {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, corev1.PodDeletionCost, strconv.Itoa(DeletionCost))
	for _, p := range pods {
		if _, err := c.cfg.Kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return Surge{}, fmt.Errorf("setting the deletion cost of %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	cur, update, err := c.getOwner(ctx, o.kind, o.namespace, o.name)
	if err != nil {
		return Surge{}, fmt.Errorf("reading %s %s/%s: %w", o.kind, o.namespace, o.name, err)
	}
	if _, taken := cur.meta.Annotations[AnnotationSurge]; taken {
		return Surge{}, fmt.Errorf("%s %s/%s is already surged by another move", o.kind, o.namespace, o.name)
	}
	s := Surge{Kind: o.kind, Namespace: o.namespace, Name: o.name, Replicas: *cur.replicas, By: int32(len(pods))}
	rec, err := json.Marshal(surgeRecord{Move: move, Replicas: s.Replicas, By: s.By})
	if err != nil {
		return Surge{}, err
	}
	if cur.meta.Annotations == nil {
		cur.meta.Annotations = map[string]string{}
	}
	cur.meta.Annotations[AnnotationSurge] = string(rec)
	*cur.replicas = s.Replicas + s.By
	if err := update(ctx); err != nil {
		return Surge{}, fmt.Errorf("surging %s %s/%s from %d to %d replicas: %w", o.kind, o.namespace, o.name, s.Replicas, s.Replicas+s.By, err)
	}
	c.log.Info("Consolidation: surged", "owner", o.kind+" "+o.namespace+"/"+o.name, "from", s.Replicas, "to", s.Replicas+s.By)
	return s, nil
}

// advanceSurge: once every surged owner has its surged count available
// (or SurgeTimeout passed), the owners are scaled back; once their
// controllers observed that, the move drains.
func (c *Consolidator) advanceSurge(ctx context.Context, m Move, now time.Time) error {
	timedOut := now.Sub(m.PhaseAt) >= c.cfg.SurgeTimeout
	all, settled := true, true
	for _, s := range m.Surges {
		o, _, err := c.getOwner(ctx, s.Kind, s.Namespace, s.Name)
		if apierrors.IsNotFound(err) {
			continue // gone with its pods
		}
		if err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", s.Kind, s.Namespace, s.Name, err)
		}
		seen := o.observedGen >= o.meta.Generation
		if !s.Back && !(seen && o.available >= *o.replicas) {
			all = false
		}
		if s.Back && !(seen && o.current == *o.replicas) {
			settled = false
		}
	}
	back := true
	for _, s := range m.Surges {
		back = back && s.Back
	}
	switch {
	case !back && (all || timedOut):
		if timedOut && !all {
			c.log.Warn("Consolidation: the surged pods were not all available in time; scaling back (the controller deletes the unready new ones first) and leaving the rest to the Cluster Autoscaler's eviction", "from", m.From, "timeout", c.cfg.SurgeTimeout)
		}
		return c.scaleBack(ctx, m)
	case back && (settled || timedOut):
		c.log.Info("Consolidation: the workloads run on the better group; draining the worse one through the Cluster Autoscaler", "from", m.From, "to", m.To)
		c.setPhase(m.From, PhaseDraining, now)
	}
	return nil
}

// scaleBack scales each surged owner of m back.
func (c *Consolidator) scaleBack(ctx context.Context, m Move) error {
	var errs []error
	for i, s := range m.Surges {
		if s.Back {
			continue
		}
		if err := c.unsurge(ctx, s.Kind, s.Namespace, s.Name, key(m.From)); err != nil {
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		if cur := c.moves[m.From]; cur != nil && i < len(cur.Surges) {
			cur.Surges[i].Back = true
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// unsurge undoes move's surge of an owner: replicas back to what they
// were when they are still the surged count (someone who changed them
// meanwhile owns the count now), the record removed.
func (c *Consolidator) unsurge(ctx context.Context, kind, ns, name, move string) error {
	o, update, err := c.getOwner(ctx, kind, ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
	}
	raw, ok := o.meta.Annotations[AnnotationSurge]
	if !ok {
		return nil
	}
	var rec surgeRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Move != move {
		return nil // not this move's
	}
	delete(o.meta.Annotations, AnnotationSurge)
	if *o.replicas == rec.Replicas+rec.By {
		*o.replicas = rec.Replicas
	} else {
		c.log.Warn("Consolidation: replicas changed during the surge; keeping them", "owner", kind+" "+ns+"/"+name, "replicas", *o.replicas, "surged", rec.Replicas+rec.By)
	}
	if err := update(ctx); err != nil {
		return fmt.Errorf("scaling %s %s/%s back to %d replicas: %w", kind, ns, name, rec.Replicas, err)
	}
	c.log.Info("Consolidation: scaled back; the controller deletes the pods on the worse group (lowest deletion cost)", "owner", kind+" "+ns+"/"+name, "replicas", *o.replicas)
	return nil
}

// collectSurges undoes the surges no surging move owns (an agent restart
// forgot its moves).
func (c *Consolidator) collectSurges(ctx context.Context) error {
	surging := c.keysIn(PhaseSurging)
	var found []ownerKey
	moves := map[ownerKey]string{}
	deps, err := c.cfg.Kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Deployments for surges left behind: %w", err)
	}
	for i := range deps.Items {
		collectRecord(&deps.Items[i].ObjectMeta, KindDeployment, &found, moves)
	}
	sets, err := c.cfg.Kube.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ReplicaSets for surges left behind: %w", err)
	}
	for i := range sets.Items {
		collectRecord(&sets.Items[i].ObjectMeta, KindReplicaSet, &found, moves)
	}
	var errs []error
	for _, o := range found {
		if surging[moves[o]] {
			continue
		}
		errs = append(errs, c.unsurge(ctx, o.kind, o.namespace, o.name, moves[o]))
	}
	return errors.Join(errs...)
}

func collectRecord(md *metav1.ObjectMeta, kind string, found *[]ownerKey, moves map[ownerKey]string) {
	raw, ok := md.Annotations[AnnotationSurge]
	if !ok {
		return
	}
	var rec surgeRecord
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return
	}
	o := ownerKey{kind, md.Namespace, md.Name}
	*found = append(*found, o)
	moves[o] = rec.Move
}

// taint puts TaintMoving (value k) on nodes.
func (c *Consolidator) taint(ctx context.Context, nodes []string, k string) error {
	var errs []error
	for _, name := range nodes {
		n, err := c.cfg.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading node %s: %w", name, err))
			continue
		}
		if movingTaint(n) != nil {
			continue
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintMoving, Value: k, Effect: corev1.TaintEffectNoSchedule})
		if _, err := c.cfg.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("tainting node %s %s:NoSchedule: %w", name, TaintMoving, err))
		}
	}
	return errors.Join(errs...)
}

// untaintStale removes TaintMoving from nodes no surging or draining move
// owns (the move ended, was abandoned, or the agent restarted).
func (c *Consolidator) untaintStale(ctx context.Context, nodes []corev1.Node) error {
	live := c.keysIn(PhaseSurging, PhaseDraining)
	var errs []error
	for i := range nodes {
		n := nodes[i].DeepCopy()
		t := movingTaint(n)
		if t == nil || live[t.Value] {
			continue
		}
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key != TaintMoving {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		if _, err := c.cfg.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing %s from node %s: %w", TaintMoving, n.Name, err))
		}
	}
	return errors.Join(errs...)
}

func movingTaint(n *corev1.Node) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == TaintMoving {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
