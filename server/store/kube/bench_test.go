package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	brokercrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds/broker"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testcluster"
	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// BenchmarkKubernetesStore measures the store on a real kube-apiserver +
// etcd (one started for all sub-benchmarks): raw commits, durable
// reservation commits through the broker's domain (group commit) and the
// instruction hop — the same measurements as server/reservations'
// BenchmarkReserveDurable and BenchmarkInstructionHop on bbolt.
func BenchmarkKubernetesStore(b *testing.B) {
	env := testcluster.Start(b)
	if err := brokercrds.Install(context.Background(), env.Config); err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	c := &cluster{cfg: env.Config, cs: cs}
	b.Run("Apply", func(b *testing.B) { benchApply(b, c) })
	b.Run("ReserveDurable", func(b *testing.B) { benchReserveDurable(b, c) })
	b.Run("InstructionHop", func(b *testing.B) { benchInstructionHop(b, c) })
}

// benchApply: one reservation per Apply, one at a time (no group commit).
func benchApply(b *testing.B, c *cluster) {
	s := c.open(b, c.namespace(b))
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := s.Apply(ctx, []store.Mutation{store.PutReservation(res(fmt.Sprintf("r-%d", i), api.PhasePending))}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

func newService(b *testing.B, c *cluster) (*reservations.Service, *countingStore) {
	st := &countingStore{Store: c.open(b, c.namespace(b))}
	svc, err := reservations.New(reservations.Config{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Placer: placement.NewIndex(placement.DefaultChunkConfig()),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Close() })
	return svc, st
}

type countingStore struct {
	store.Store
	applies atomic.Int64
}

func (c *countingStore) Apply(ctx context.Context, batch []store.Mutation) error {
	c.applies.Add(1)
	return c.Store.Apply(ctx, batch)
}

func setup(b *testing.B, svc *reservations.Service, chunks int) {
	ctx := context.Background()
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	ad := api.AdvertisementRequest{ClusterID: "p1", LiqoClusterID: "liqo-p1", Resources: corev1.ResourceList{
		corev1.ResourceCPU: q(fmt.Sprint(2 * chunks)), corev1.ResourceMemory: q(fmt.Sprintf("%dGi", 4*chunks))}}
	if _, err := svc.Advertise(ctx, "p1", ad); err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Heartbeat(ctx, "c1", api.HeartbeatRequest{ClusterID: "c1", LiqoClusterID: "liqo-c1"}); err != nil {
		b.Fatal(err)
	}
}

var stdReq = api.ReservationRequest{ProviderClusterID: "p1", ChunkCount: 1, ChunkType: api.ChunkStandard}

func benchReserveDurable(b *testing.B, c *cluster) {
	svc, st := newService(b, c)
	setup(b, svc, b.N+1)
	var n atomic.Int64
	b.SetParallelism(64)
	before := st.applies.Load()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := svc.Reserve(context.Background(), "c1", fmt.Sprintf("bench-%d", n.Add(1)), stdReq); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	b.ReportMetric(float64(b.N)/float64(st.applies.Load()-before), "commits/apply")
}

// benchInstructionHop: the provider posts its GenerateKubeconfig result and
// the consumer's waiting long-poll returns the Peer.
func benchInstructionHop(b *testing.B, c *cluster) {
	svc, _ := newService(b, c)
	setup(b, svc, 2)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("hop-%d", i)
		if _, _, err := svc.Reserve(ctx, "c1", id, stdReq); err != nil {
			b.Fatal(err)
		}
		gk := only(b, svc, "p1", api.RoleProvider, api.KindGenerateKubeconfig)
		got := make(chan []api.InstructionView, 1)
		go func() {
			v, err := svc.Instructions(ctx, "c1", api.RoleConsumer, time.Minute)
			if err != nil {
				b.Error(err)
			}
			got <- v
		}()
		testpoll.UntilSeen(b, time.Minute, "the long-poll waiting", func() (bool, string) {
			n := svc.Waiters()
			return n == 1, fmt.Sprintf("%d waiters", n)
		})
		b.StartTimer()
		start := time.Now()
		result(b, svc, "p1", api.RoleProvider, gk, api.InstructionResultRequest{Status: api.ResultSucceeded,
			Payload: &api.InstructionPayload{Kind: api.PayloadKubeconfig, Kubeconfig: "K"}})
		v := <-got
		b.StopTimer()
		lat = append(lat, time.Since(start))
		if len(v) != 1 || v[0].Kind != api.KindPeer {
			b.Fatalf("hop %d woke with %+v", i, v)
		}
		// Clean up so the next iteration needs a new kubeconfig.
		result(b, svc, "c1", api.RoleConsumer, v[0].ID, api.InstructionResultRequest{Status: api.ResultFailed,
			Error: &api.ErrorEnvelope{Code: api.CodeInternalError, Message: "bench"}})
		result(b, svc, "c1", api.RoleConsumer, only(b, svc, "c1", api.RoleConsumer, api.KindCleanup), api.InstructionResultRequest{Status: api.ResultSucceeded})
		result(b, svc, "p1", api.RoleProvider, only(b, svc, "p1", api.RoleProvider, api.KindCleanup), api.InstructionResultRequest{Status: api.ResultSucceeded})
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}

// only returns the id of the one pending instruction of kind for cn.
func only(b *testing.B, svc *reservations.Service, cn string, role api.Role, kind api.InstructionKind) string {
	b.Helper()
	v, err := svc.Instructions(context.Background(), cn, role, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range v {
		if in.Kind == kind {
			return in.ID
		}
	}
	b.Fatalf("no %s instruction for %s among %+v", kind, cn, v)
	return ""
}

func result(b *testing.B, svc *reservations.Service, cn string, role api.Role, id string, req api.InstructionResultRequest) {
	b.Helper()
	if err := svc.PostResult(context.Background(), cn, role, id, req); err != nil {
		b.Fatalf("result %s by %s: %v", id, cn, err)
	}
}
