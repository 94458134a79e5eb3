package demo

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/federation-autoscaler/federation-autoscaler/adapter/localapi"
	"github.com/federation-autoscaler/federation-autoscaler/agent/brokerclient"
	"github.com/federation-autoscaler/federation-autoscaler/agent/console"
	"github.com/federation-autoscaler/federation-autoscaler/agent/probe"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/cluster"
	"github.com/federation-autoscaler/federation-autoscaler/web"
	"github.com/federation-autoscaler/federation-autoscaler/web/auth"
)

// serveFiber serves app on ln and runs live (the console's push loop)
// until ctx ends; wg, when set, is told when both have returned.
func (f *Federation) serveFiber(ctx context.Context, name string, ln net.Listener, app *fiber.App, live func(context.Context) error, wg *sync.WaitGroup) {
	if wg != nil {
		wg.Add(2)
	}
	f.run(ctx, name, func(ctx context.Context) error {
		if wg != nil {
			defer wg.Done()
		}
		return web.Serve(ctx, app, ln)
	})
	f.run(ctx, name+" live updates", func(ctx context.Context) error {
		if wg != nil {
			defer wg.Done()
		}
		return live(ctx)
	})
}

func (f *Federation) providerConsole(ctx context.Context, o Options, port int, p *Provider, wg *sync.WaitGroup) (string, error) {
	tok, err := auth.NewStaticToken(f.ConsoleToken)
	if err != nil {
		return "", err
	}
	pc, err := web.NewProviderConsole(&console.Provider{ClusterID: p.Spec.ID, Agent: p.Agent}, web.ConsoleOptions{Token: tok, Refresh: 2 * time.Second, Log: o.Logger.With("console", p.Spec.ID)})
	if err != nil {
		return "", err
	}
	ln, err := f.guard.Listen(ctx, "console", o.addr(port))
	if err != nil {
		return "", fmt.Errorf("console listener %s: %w (pick another --base-port)", o.addr(port), err)
	}
	f.serveFiber(ctx, p.Spec.ID+" console", ln, pc.App(), pc.Run, wg)
	return "http://" + urlHost(ln), nil
}

func (f *Federation) consumerConsole(ctx context.Context, o Options, c *Consumer, cl client.Client, kube kubernetes.Interface, bc *brokerclient.Client, local *localapi.Client) (string, error) {
	tok, err := auth.NewStaticToken(f.ConsoleToken)
	if err != nil {
		return "", err
	}
	backend := &workloadConsumer{
		Consumer: &console.Consumer{
			ClusterID: c.ID, Namespace: c.Namespace, Agent: c.Agent, Local: local, Broker: bc, Client: cl, Pods: cl,
			Prober: probe.NewProber(probe.ProberConfig{}), Region: "ENG", City: "London", Logger: o.Logger,
		},
		w: c.Workload, kube: kube,
	}
	cc, err := web.NewConsumerConsole(backend, web.ConsoleOptions{Token: tok, Refresh: 2 * time.Second, Log: o.Logger.With("console", c.ID)})
	if err != nil {
		return "", err
	}
	ln, err := f.guard.Listen(ctx, "console", o.addr(4))
	if err != nil {
		return "", fmt.Errorf("consumer console listener %s: %w (pick another --base-port)", o.addr(4), err)
	}
	f.serveFiber(ctx, "consumer console", ln, cc.App(), cc.Run, nil)
	return "http://" + urlHost(ln), nil
}

// workloadConsumer adds the demo workload switch (web.WorkloadBackend) to
// the consumer console.
type workloadConsumer struct {
	*console.Consumer
	w    *cluster.Workload
	kube kubernetes.Interface
}

var _ web.WorkloadBackend = (*workloadConsumer)(nil)

func (b *workloadConsumer) Workload(ctx context.Context) (web.Workload, error) {
	spec := b.w.Spec()
	out := web.Workload{Enabled: spec.Enabled, Replicas: spec.Replicas, PodCPU: spec.CPU, PodMemory: spec.Memory}
	pods, err := b.kube.CoreV1().Pods(b.w.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: cluster.WorkloadLabel})
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

func (b *workloadConsumer) SetWorkload(_ context.Context, w web.Workload) error {
	return b.w.Set(cluster.WorkloadSpec{Enabled: w.Enabled, Replicas: w.Replicas, CPU: w.PodCPU, Memory: w.PodMemory})
}

// Subscribe adds the workload's pods to the consumer's change signal.
func (b *workloadConsumer) Subscribe(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	inner := b.Consumer.Subscribe(ctx)
	go func() {
		defer close(out)
		t := time.NewTicker(console.PollInterval)
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
