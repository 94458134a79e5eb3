package demo

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web"
)

// workloadConsumer adds the demo workload switch (web.WorkloadBackend) to
// the consumer console, keeps the consumer's settings (policy, location,
// workload) in the data folder across runs (the simulated cluster does not
// outlive one) and moves the providers' probe delays with the location.
type workloadConsumer struct {
	*console.Consumer
	w        *workload.Workload
	kube     kubernetes.Interface
	f        *Federation
	settings string
}

// SetPolicy applies and saves the policy.
func (b *workloadConsumer) SetPolicy(ctx context.Context, p api.Placement) error {
	if err := b.Consumer.SetPolicy(ctx, p); err != nil {
		return err
	}
	return b.save(ctx)
}

// SetLocation applies and saves the location, and moves the probe delays.
func (b *workloadConsumer) SetLocation(ctx context.Context, loc *api.Topology) error {
	if err := b.Consumer.SetLocation(ctx, loc); err != nil {
		return err
	}
	b.f.setConsumerLocation(loc)
	return b.save(ctx)
}

// SetIntent applies and saves the intent.
func (b *workloadConsumer) SetIntent(ctx context.Context, intent string) error {
	if err := b.Consumer.SetIntent(ctx, intent); err != nil {
		return err
	}
	return b.save(ctx)
}

func (b *workloadConsumer) save(ctx context.Context) error {
	var list fav1alpha1.ConsumerPolicyList
	if err := b.Client.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return fmt.Errorf("reading the policy to save it: %w", err)
	}
	s := consumerSettings{Workload: savedWorkloadOf(b.w.Spec())}
	if len(list.Items) > 0 {
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		s.Policy = list.Items[0].Spec
	}
	return s.write(b.settings)
}

// movableProvider moves the provider's probe delay when its console sets
// its location (the demo models network distance with echo delays).
type movableProvider struct {
	*console.Provider
	moved func()
}

func (p *movableProvider) ApplySharing(ctx context.Context, cfg web.SharingConfig) error {
	if err := p.Provider.ApplySharing(ctx, cfg); err != nil {
		return err
	}
	p.moved()
	return nil
}

var _ web.WorkloadBackend = (*workloadConsumer)(nil)

func (b *workloadConsumer) Workload(ctx context.Context) (web.Workload, error) {
	spec := b.w.Spec()
	out := web.Workload{Enabled: spec.Enabled, Replicas: spec.Replicas, PodCPU: spec.CPU, PodMemory: spec.Memory}
	pods, err := b.kube.CoreV1().Pods(b.w.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: workload.Label})
	if err != nil {
		return out, fmt.Errorf("listing the workload's pods: %w", err)
	}
	for _, p := range pods.Items {
		switch p.Status.Phase {
		case corev1.PodRunning:
			out.Running++
		case corev1.PodPending, "":
			out.Pending++
		}
	}
	return out, nil
}

func (b *workloadConsumer) SetWorkload(ctx context.Context, w web.Workload) error {
	if err := b.w.Set(workload.Spec{Enabled: w.Enabled, Replicas: w.Replicas, CPU: w.PodCPU, Memory: w.PodMemory}); err != nil {
		return err
	}
	return b.save(ctx)
}

// workloadPoll is how often a watched console checks the workload's pods.
const workloadPoll = 500 * time.Millisecond

// Subscribe adds the workload's pods to the consumer's change signal.
func (b *workloadConsumer) Subscribe(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	inner := b.Consumer.Subscribe(ctx)
	go func() {
		defer close(out)
		t := time.NewTicker(workloadPoll)
		defer t.Stop()
		last := ""
		for {
			select {
			case _, ok := <-inner:
				if !ok {
					return
				}
			case <-t.C:
				w, err := b.Workload(ctx)
				fp := fmt.Sprint(w.Enabled, w.Replicas, w.PodCPU.String(), w.PodMemory.String(), w.Running, w.Pending, err)
				if fp == last {
					continue
				}
				last = fp
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}
