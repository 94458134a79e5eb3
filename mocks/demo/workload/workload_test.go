package workload_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/cluster"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
)

// eventually waits up to 15 s for cond to hold; an error is reported if it
// still fails at the deadline.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	testpoll.UntilNil(t, 15*time.Second, what, func() error {
		ok, err := cond()
		if err == nil && !ok {
			err = errors.New("not yet")
		}
		return err
	})
}

// podCounts returns (running, unschedulable) workload pods.
func podCounts(ctx context.Context, c *cluster.Cluster, ns string) (running, unschedulable int, nodes map[string]int, err error) {
	list, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workload.Label})
	if err != nil {
		return 0, 0, nil, err
	}
	nodes = map[string]int{}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning {
			running++
			nodes[p.Spec.NodeName]++
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
			}
		}
	}
	return running, unschedulable, nodes, nil
}

func TestSchedulerAndWorkload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Name: "consumer", Nodes: []cluster.NodeSpec{{Name: "local-1", CPU: "4", Memory: "8Gi"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	w := workload.New(c.Client(), "workload", nil)
	c.Go("workload", w.Run)

	set := func(enabled bool, replicas int32, cpu string) {
		t.Helper()
		if err := w.Set(workload.Spec{Enabled: enabled, Replicas: replicas, CPU: resource.MustParse(cpu), Memory: resource.MustParse("1Gi")}); err != nil {
			t.Fatal(err)
		}
	}
	set(true, 3, "1")
	eventually(t, "3 pods running on the local node", func() (bool, error) {
		r, u, _, err := podCounts(ctx, c, "workload")
		return r == 3 && u == 0, err
	})

	set(true, 6, "1")
	eventually(t, "4 running, 2 unschedulable", func() (bool, error) {
		r, u, _, err := podCounts(ctx, c, "workload")
		return r == 4 && u == 2, err
	})

	// A tainted virtual node: the workload tolerates Liqo's taint.
	if err := c.AddNode(ctx, cluster.NodeSpec{Name: "virtual-1", CPU: "2", Memory: "4Gi"}); err != nil {
		t.Fatal(err)
	}
	n, err := c.Client().CoreV1().Nodes().Get(ctx, "virtual-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = []corev1.Taint{{Key: "virtual-node.liqo.io/not-allowed", Value: "true", Effect: corev1.TaintEffectNoExecute}}
	if _, err := c.Client().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "all 6 running, 2 on the virtual node", func() (bool, error) {
		r, u, nodes, err := podCounts(ctx, c, "workload")
		return r == 6 && u == 0 && nodes["virtual-1"] == 2, err
	})

	// A pod without the toleration never lands on the tainted node. It is
	// not the workload's (no workload label): the workload deletes pods of
	// its label that are not its size, which raced with this check.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "workload"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	if _, err := c.Client().CoreV1().Pods("workload").Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the untolerating pod is marked unschedulable with the taint as reason", func() (bool, error) {
		p, err := c.Client().CoreV1().Pods("workload").Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Reason == corev1.PodReasonUnschedulable {
				return p.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})
	if err := c.Client().CoreV1().Pods("workload").Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The virtual node goes away: its pods are collected and recreated.
	if err := c.Client().CoreV1().Nodes().Delete(ctx, "virtual-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pods of the vanished node replaced and pending", func() (bool, error) {
		r, u, nodes, err := podCounts(ctx, c, "workload")
		return r == 4 && u == 2 && nodes["virtual-1"] == 0, err
	})

	set(false, 6, "1")
	eventually(t, "workload off: no pods", func() (bool, error) {
		list, err := c.Client().CoreV1().Pods("workload").List(ctx, metav1.ListOptions{})
		return len(list.Items) == 0, err
	})
}

// TestReplicaSetScaleAndDeletionCost: the workload obeys its ReplicaSet's
// spec.replicas whoever sets it (the consolidation's surge), writes the
// status back, and on scale-down deletes the pod of lowest
// pod-deletion-cost, as the real ReplicaSet controller does.
func TestReplicaSetScaleAndDeletionCost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Name: "consumer", Nodes: []cluster.NodeSpec{{Name: "local-1", CPU: "8", Memory: "16Gi"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	w := workload.New(c.Client(), "workload", nil)
	c.Go("workload", w.Run)
	if err := w.Set(workload.Spec{Enabled: true, Replicas: 3, CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}); err != nil {
		t.Fatal(err)
	}
	rsAPI := c.Client().AppsV1().ReplicaSets("workload")
	settled := func(n int32) func() (bool, error) {
		return func() (bool, error) {
			r, _, _, err := podCounts(ctx, c, "workload")
			if err != nil {
				return false, err
			}
			rs, err := rsAPI.Get(ctx, workload.ReplicaSetName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return r == int(n) && rs.Status.ObservedGeneration == rs.Generation && rs.Status.Replicas == n && rs.Status.AvailableReplicas == n, nil
		}
	}
	eventually(t, "3 pods running, the status says so", settled(3))
	scale := func(n int32) {
		t.Helper()
		rs, err := rsAPI.Get(ctx, workload.ReplicaSetName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs.Spec.Replicas = &n
		if _, err := rsAPI.Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(4)
	eventually(t, "4 pods running after the ReplicaSet was scaled to 4", settled(4))
	list, err := c.Client().CoreV1().Pods("workload").List(ctx, metav1.ListOptions{LabelSelector: workload.Label})
	if err != nil {
		t.Fatal(err)
	}
	// The oldest pod: newest-first would keep it.
	oldest := list.Items[0]
	for _, p := range list.Items {
		if p.CreationTimestamp.Before(&oldest.CreationTimestamp) {
			oldest = p
		}
	}
	oldest.Annotations = map[string]string{corev1.PodDeletionCost: "-100"}
	if _, err := c.Client().CoreV1().Pods("workload").Update(ctx, &oldest, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale(3)
	eventually(t, "3 pods running after the scale-back", settled(3))
	if _, err := c.Client().CoreV1().Pods("workload").Get(ctx, oldest.Name, metav1.GetOptions{}); err == nil {
		list, _ := c.Client().CoreV1().Pods("workload").List(ctx, metav1.ListOptions{LabelSelector: workload.Label})
		for _, p := range list.Items {
			if p.Name == oldest.Name && p.DeletionTimestamp == nil {
				t.Fatalf("the lowest-cost pod %s survived the scale-down", oldest.Name)
			}
		}
	}
}
