package provider

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/testpoll"
	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// viewBroker serves a changeable view of the provider and hands out the
// instructions queued on it once.
type viewBroker struct {
	recordingBroker
	mu      sync.Mutex
	view    api.AdvertisementSnapshot
	viewErr error
	queued  chan []api.InstructionView
}

func (b *viewBroker) Advertisement(_ context.Context, id string) (api.AdvertisementSnapshot, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.viewErr != nil {
		return api.AdvertisementSnapshot{}, b.viewErr
	}
	v := b.view
	v.ClusterID = id
	return v, nil
}

func (b *viewBroker) set(v api.AdvertisementSnapshot, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.view, b.viewErr = v, err
}

func (b *viewBroker) Instructions(ctx context.Context, _ time.Duration) ([]api.InstructionView, bool, error) {
	select {
	case in := <-b.queued:
		return in, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// The agent re-reads the broker's view of itself after an accepted
// advertisement and after every handled instruction (not only on its poll
// tick, here an hour), and keeps the last view when a read fails.
func TestBrokerViewFollowsAdvertisementsAndInstructions(t *testing.T) {
	kube := kubefake.NewClientset()
	mkNode(t, kube, "worker-1", true, false, nil, "4", "8Gi")
	b := &viewBroker{queued: make(chan []api.InstructionView, 1)}
	b.set(api.AdvertisementSnapshot{Chunks: map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: 2, AvailableChunks: 2}}}, nil)
	a, err := New(Config{ClusterID: "provider-1", Kube: kube, Broker: b, Driver: nopUsers{}, Interval: time.Hour, ConfigPoll: time.Hour, StatePoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := a.BrokerView(); v != nil {
		t.Fatalf("a view before the first read: %+v", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := a.Subscribe(ctx)
	// signalled waits for the console's change signal: every step below
	// changes what the console shows, so each must signal it (the console
	// pushes on the signal; it no longer polls the agent).
	signalled := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatalf("no change signal after %s", what)
		}
	}
	runAgent(t, a)
	testpoll.Until(t, 30*time.Second, "the view read after the first advertisement", func() bool {
		v, e := a.BrokerView()
		return v != nil && e == "" && v.Chunks[api.ChunkStandard].TotalChunks == 2 && len(v.Loans) == 0
	})
	signalled("the first advertisement and view")

	loan := api.ProviderLoan{ReservationID: "r1", ConsumerClusterID: "consumer-1", ChunkType: api.ChunkStandard, ChunkCount: 1, Status: api.PhaseGeneratingKubeconfig}
	b.set(api.AdvertisementSnapshot{
		Chunks: map[api.ChunkType]api.ChunkCounts{api.ChunkStandard: {TotalChunks: 2, ReservedChunks: 1, AvailableChunks: 1}},
		Loans:  []api.ProviderLoan{loan},
	}, nil)
	b.queued <- []api.InstructionView{{ID: "gk-1", Kind: api.KindGenerateKubeconfig, ReservationID: "r1", ConsumerClusterID: "consumer-1"}}
	testpoll.Until(t, 30*time.Second, "the loan read after the handled instruction", func() bool {
		v, _ := a.BrokerView()
		return v != nil && len(v.Loans) == 1 && v.Loans[0] == loan && v.Chunks[api.ChunkStandard].ReservedChunks == 1
	})
	signalled("the loan's view")

	b.set(api.AdvertisementSnapshot{}, errors.New("connection refused"))
	b.queued <- []api.InstructionView{{ID: "cl-1", Kind: api.KindCleanup, ReservationID: "r1", ConsumerClusterID: "consumer-1"}}
	testpoll.Until(t, 30*time.Second, "the read error recorded, the last view kept", func() bool {
		v, e := a.BrokerView()
		return e == "connection refused" && v != nil && len(v.Loans) == 1
	})
	signalled("a failed view read")
}
