package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/federation-autoscaler/federation-autoscaler/mocks/kubeapi"
)

// NodeSpec describes one simulated worker node.
type NodeSpec struct {
	Name   string
	CPU    string // a Quantity, e.g. "8"
	Memory string // a Quantity, e.g. "32Gi"
	GPU    int64
	Labels map[string]string
}

// Options configure a simulated cluster.
type Options struct {
	// Name identifies the cluster (logs, node names).
	Name string
	// Addr is the API server's listen address, e.g. "127.0.1.1:0".
	Addr string
	// Nodes are created Ready at start.
	Nodes []NodeSpec
	// Logger receives the cluster's logs.
	Logger *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Cluster is a running simulated cluster.
type Cluster struct {
	opts   Options
	server *kubeapi.Server
	config *rest.Config
	client kubernetes.Interface

	Scheduler *Scheduler

	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// Start serves the cluster's API, creates its nodes and runs its scheduler
// until ctx ends or Stop is called.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		return nil, errors.New("cluster: a name is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Cluster{opts: opts, ctx: ctx, cancel: cancel}
	c.server = kubeapi.New(kubeapi.Options{Name: opts.Name, Logger: opts.Logger, Now: opts.Now})
	// The API server outlives the cluster's context, as a real cluster
	// outlives its clients: Stop closes it after every component using it
	// has returned. Closed at the context's end instead, it would refuse
	// the connections of clients still stopping, and client-go's
	// reflectors back off (about a second, deaf to their context) on a
	// refused connection.
	cfg, err := c.server.Start(context.WithoutCancel(ctx), opts.Addr)
	if err != nil {
		cancel()
		return nil, err
	}
	c.config = cfg
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		cancel()
		return nil, fmt.Errorf("cluster %s: client: %w", opts.Name, err)
	}
	for _, n := range opts.Nodes {
		if err := c.AddNode(ctx, n); err != nil {
			cancel()
			return nil, err
		}
	}
	c.Scheduler = NewScheduler(c.client, opts.Logger.With("component", "scheduler"), opts.Now)
	c.Go("scheduler", c.Scheduler.Run)
	return c, nil
}

// Go runs fn for the cluster's lifetime (its context ends with Stop or
// with the context Start was given); Stop waits for it.
func (c *Cluster) Go(name string, fn func(context.Context) error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := fn(c.ctx); err != nil && c.ctx.Err() == nil {
			c.opts.Logger.Error("Cluster component stopped", "cluster", c.opts.Name, "component", name, "err", err)
		}
	}()
}

// RESTConfig returns a client configuration for the cluster's API.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// Client returns a client-go clientset for the cluster.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// AddNode creates a Ready node.
func (c *Cluster) AddNode(ctx context.Context, n NodeSpec) error {
	cpu, err := resource.ParseQuantity(n.CPU)
	if err != nil {
		return fmt.Errorf("node %s: cpu %q: %w", n.Name, n.CPU, err)
	}
	mem, err := resource.ParseQuantity(n.Memory)
	if err != nil {
		return fmt.Errorf("node %s: memory %q: %w", n.Name, n.Memory, err)
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: resource.MustParse("110")}
	if n.GPU > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(n.GPU, resource.DecimalSI)
	}
	labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(c.opts.Now()), LastTransitionTime: metav1.NewTime(c.opts.Now())}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}},
		},
	}
	created, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster %s: creating node %s: %w", c.opts.Name, n.Name, err)
	}
	// Status is a subresource: write it separately, as a kubelet does.
	created.Status = node.Status
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: node %s status: %w", c.opts.Name, n.Name, err)
	}
	return nil
}

// Stop ends every component and the API server.
func (c *Cluster) Stop() error {
	c.cancel()
	c.wg.Wait()
	return c.server.Close()
}
