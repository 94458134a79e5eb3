// Package workload is the demo's workload: a Deployment-like set of pods
// that the consumer console switches on and off and resizes, so that the
// consumer cluster runs out of room and the autoscaler borrows chunks.
package workload

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/federation-autoscaler/federation-autoscaler/agent/liqo"
)

// Spec is the workload's desired state.
type Spec struct {
	// Enabled switches the workload on; off means zero pods.
	Enabled bool
	// Replicas is the number of pods while enabled.
	Replicas int32
	// CPU and Memory are each pod's requests.
	CPU    resource.Quantity
	Memory resource.Quantity
}

// Validate says what is wrong with a spec.
func (w Spec) Validate() error {
	if w.Replicas < 0 || w.Replicas > 200 {
		return fmt.Errorf("replicas %d: use 0 to 200", w.Replicas)
	}
	if w.CPU.Sign() <= 0 || w.Memory.Sign() <= 0 {
		return fmt.Errorf("pod size cpu=%s memory=%s: both must be positive", w.CPU.String(), w.Memory.String())
	}
	return nil
}

// Label marks the workload's pods.
const Label = "demo.federation-autoscaler.io/workload"

// VirtualNodeToleration lets a pod run on a Liqo virtual node. Real Liqo
// adds it to pods of offloaded namespaces; the demo workload carries it.
var VirtualNodeToleration = corev1.Toleration{Key: liqo.VirtualNodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}

// Workload keeps a Deployment-like set of pods in step with its spec: the
// consumer console's workload switch. It plays the ReplicaSet controller
// of the simulated cluster for its ReplicaSet "workload" (created at Run),
// so its pods have a controller, as the Cluster Autoscaler requires of the
// pods it moves when it drains a node. A spec the console sets is written
// to the ReplicaSet's spec.replicas; the pods follow spec.replicas (so
// whoever scales the ReplicaSet — the consolidation's surge — is obeyed
// as by the real controller), scale-down deletes the pods the real
// controller would (deleteFirst), and the status (replicas, ready,
// available, observedGeneration) is written back.
type Workload struct {
	client    kubernetes.Interface
	namespace string
	log       *slog.Logger

	mu   sync.Mutex
	spec Spec
	// unapplied is set while spec's replicas are not yet written to the
	// ReplicaSet.
	unapplied bool
	kick      chan struct{}
	// owner is the pods' controller reference (set by Run).
	owner metav1.OwnerReference
}

// ReplicaSetName names the workload's ReplicaSet.
const ReplicaSetName = "workload"

// New returns a workload in namespace (created if missing), off.
func New(client kubernetes.Interface, namespace string, log *slog.Logger) *Workload {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Workload{
		client: client, namespace: namespace, log: log, kick: make(chan struct{}, 1), unapplied: true,
		spec: Spec{Replicas: 4, CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
	}
}

// Spec returns the desired state.
func (w *Workload) Spec() Spec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spec
}

// Namespace is where the workload's pods live.
func (w *Workload) Namespace() string { return w.namespace }

// Set changes the desired state; the pods follow at once.
func (w *Workload) Set(spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	w.mu.Lock()
	w.spec, w.unapplied = spec, true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// Run reconciles until ctx ends. Pods that vanish (their node was removed)
// are replaced on the next pass.
func (w *Workload) Run(ctx context.Context) error {
	_, err := w.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating workload namespace %s: %w", w.namespace, err)
	}
	if err := w.ensureReplicaSet(ctx); err != nil {
		return err
	}
	// Why a ticker: replacement of pods deleted by the pod GC needs no
	// watch for a demo; one second keeps the reaction prompt.
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		if err := w.reconcile(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("Workload reconcile failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		case <-ticker.C:
		}
	}
}

// ensureReplicaSet creates the ReplicaSet the pods belong to (or reads
// it) and records the controller reference the pods carry.
func (w *Workload) ensureReplicaSet(ctx context.Context) error {
	sel := map[string]string{Label: "true"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: ReplicaSetName, Namespace: w.namespace}, Spec: appsv1.ReplicaSetSpec{
		Replicas: new(int32(0)),
		Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}},
	}}
	got, err := w.client.AppsV1().ReplicaSets(w.namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = w.client.AppsV1().ReplicaSets(w.namespace).Get(ctx, ReplicaSetName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating the workload's ReplicaSet: %w", err)
	}
	yes := true
	w.mu.Lock()
	w.owner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: got.Name, UID: got.UID, Controller: &yes, BlockOwnerDeletion: &yes}
	w.mu.Unlock()
	return nil
}

func (w *Workload) reconcile(ctx context.Context) error {
	rs, err := w.replicas(ctx)
	if err != nil {
		return err
	}
	spec := w.Spec()
	want := int32(1)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	list, err := w.client.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: Label})
	if err != nil {
		return fmt.Errorf("listing workload pods: %w", err)
	}
	var keep []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !sameSize(&p, spec) {
			if err := w.client.CoreV1().Pods(w.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting resized pod %s: %w", p.Name, err)
			}
			continue
		}
		keep = append(keep, p)
	}
	if excess := len(keep) - int(want); excess > 0 {
		colocated := map[string]int{}
		for i := range keep {
			colocated[keep[i].Spec.NodeName]++
		}
		sort.SliceStable(keep, func(i, j int) bool { return deleteFirst(&keep[i], &keep[j], colocated) })
		for _, p := range keep[:excess] {
			if err := w.client.CoreV1().Pods(w.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting pod %s: %w", p.Name, err)
			}
		}
		keep = keep[excess:]
	}
	created := 0
	for n := int32(len(keep)); n < want; n++ {
		if _, err := w.client.CoreV1().Pods(w.namespace).Create(ctx, w.pod(spec), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating workload pod: %w", err)
		}
		created++
	}
	return w.writeStatus(ctx, rs, keep, created)
}

// replicas writes a spec the console set to the ReplicaSet's
// spec.replicas and returns the ReplicaSet.
func (w *Workload) replicas(ctx context.Context) (*appsv1.ReplicaSet, error) {
	rs, err := w.client.AppsV1().ReplicaSets(w.namespace).Get(ctx, ReplicaSetName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleted by hand: made again, at the console's count.
		if err = w.ensureReplicaSet(ctx); err == nil {
			w.mu.Lock()
			w.unapplied = true
			w.mu.Unlock()
			rs, err = w.client.AppsV1().ReplicaSets(w.namespace).Get(ctx, ReplicaSetName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the workload's ReplicaSet: %w", err)
	}
	w.mu.Lock()
	spec, unapplied := w.spec, w.unapplied
	w.mu.Unlock()
	if !unapplied {
		return rs, nil
	}
	want := int32(0)
	if spec.Enabled {
		want = spec.Replicas
	}
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != want {
		rs.Spec.Replicas = &want
		if rs, err = w.client.AppsV1().ReplicaSets(w.namespace).Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("scaling the workload's ReplicaSet to %d: %w", want, err)
		}
	}
	w.mu.Lock()
	if w.spec == spec {
		w.unapplied = false
	}
	w.mu.Unlock()
	return rs, nil
}

// writeStatus records what the pass left: the kept pods and those created
// (neither ready nor available yet).
func (w *Workload) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, keep []corev1.Pod, created int) error {
	ready := int32(0)
	for i := range keep {
		if keep[i].Status.Phase == corev1.PodRunning && podReady(&keep[i]) {
			ready++
		}
	}
	st := appsv1.ReplicaSetStatus{Replicas: int32(len(keep) + created), FullyLabeledReplicas: int32(len(keep) + created),
		ReadyReplicas: ready, AvailableReplicas: ready, ObservedGeneration: rs.Generation}
	if equality.Semantic.DeepEqual(rs.Status, st) {
		return nil
	}
	rs.Status = st
	if _, err := w.client.AppsV1().ReplicaSets(w.namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("writing the workload's ReplicaSet status: %w", err)
	}
	return nil
}

// deleteFirst reports whether the ReplicaSet controller deletes a before b
// on scale-down, by Kubernetes' ranking of active pods (the controller's
// ActivePodsWithRanks, restated): unscheduled before scheduled; Pending
// before Unknown before Running; not ready before ready; lower
// controller.kubernetes.io/pod-deletion-cost first; more of the set's pods
// on the same node first; ready for less time first; more restarts first;
// newer first.
func deleteFirst(a, b *corev1.Pod, colocated map[string]int) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := podReady(a), podReady(b); ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if na, nb := colocated[a.Spec.NodeName], colocated[b.Spec.NodeName]; na != nb {
		return na > nb
	}
	if ta, tb := readySince(a), readySince(b); podReady(a) && !ta.Equal(tb) {
		return ta.After(tb)
	}
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return ra > rb
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

// deletionCost is the pod's pod-deletion-cost (0 when unset or not an
// int32, as the controller reads it).
func deletionCost(p *corev1.Pod) int32 {
	v, err := strconv.ParseInt(p.Annotations[corev1.PodDeletionCost], 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

func podReady(p *corev1.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readySince(p *corev1.Pod) time.Time {
	if c := readyCondition(p); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func restarts(p *corev1.Pod) int32 {
	n := int32(0)
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

func sameSize(p *corev1.Pod, spec Spec) bool {
	if len(p.Spec.Containers) != 1 {
		return false
	}
	r := p.Spec.Containers[0].Resources.Requests
	return r.Cpu().Cmp(spec.CPU) == 0 && r.Memory().Cmp(spec.Memory) == 0
}

func (w *Workload) pod(spec Spec) *corev1.Pod {
	w.mu.Lock()
	owner := w.owner
	w.mu.Unlock()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "workload-", Labels: map[string]string{Label: "true", "app": "demo-workload"}, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: spec.CPU, corev1.ResourceMemory: spec.Memory}},
			}},
			Tolerations: []corev1.Toleration{VirtualNodeToleration},
		},
	}
}
