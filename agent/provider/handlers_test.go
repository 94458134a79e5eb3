package provider

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

// recordingUsers records the ids the handlers pass to the driver.
type recordingUsers struct {
	generated, deleted []string
	deleteErr          error
}

func (r *recordingUsers) GeneratePeeringUser(_ context.Context, id string) (string, error) {
	r.generated = append(r.generated, id)
	return "apiVersion: v1\nkind: Config\n", nil
}
func (r *recordingUsers) DeletePeeringUser(_ context.Context, id string) error {
	r.deleted = append(r.deleted, id)
	return r.deleteErr
}

func TestCredentialHandlers(t *testing.T) {
	users := &recordingUsers{}
	store, err := NewStore(Sources{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Apply(SharingConfig{DeniedConsumers: []string{"consumer-bad"}}); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{ClusterID: "provider-1", Kube: kubefake.NewClientset(), Broker: &recordingBroker{}, Driver: users, Sharing: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The credential is minted for the consumer's Liqo id (reference bug #17).
	p, err := a.handleGenerateKubeconfig(ctx, api.InstructionView{ID: "gk-c-p", ConsumerClusterID: "consumer-1", ConsumerLiqoClusterID: "liqo-consumer-1"})
	if err != nil || p.Kind != api.PayloadKubeconfig || p.Kubeconfig == "" {
		t.Fatalf("payload %+v err %v", p, err)
	}
	if len(users.generated) != 1 || users.generated[0] != "liqo-consumer-1" {
		t.Errorf("generated for %v, want the Liqo id", users.generated)
	}
	// A consumer the sharing rules deny gets Forbidden, nothing minted.
	_, err = a.handleGenerateKubeconfig(ctx, api.InstructionView{ID: "gk-bad-p", ConsumerClusterID: "consumer-bad", ConsumerLiqoClusterID: "liqo-bad"})
	if !api.IsCode(err, api.CodeForbidden) || len(users.generated) != 1 {
		t.Errorf("denied consumer: err %v, generated %v", err, users.generated)
	}
	// No consumer at all is an invalid instruction.
	if _, err := a.handleGenerateKubeconfig(ctx, api.InstructionView{ID: "gk-x"}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("no consumer: %v", err)
	}
	// Cleanup: "not found" is success, other errors are failures.
	users.deleteErr = apierrors.NewNotFound(schema.GroupResource{Resource: "peeringusers"}, "liqo-consumer-1")
	if _, err := a.handleCleanup(ctx, api.InstructionView{ID: "pcleanup-c-p", ConsumerClusterID: "consumer-1", ConsumerLiqoClusterID: "liqo-consumer-1"}); err != nil {
		t.Errorf("cleanup of a missing user: %v", err)
	}
	users.deleteErr = errors.New("liqoctl: exit status 1")
	if _, err := a.handleCleanup(ctx, api.InstructionView{ID: "pcleanup-c-p", ConsumerClusterID: "consumer-1"}); err == nil {
		t.Error("cleanup failure swallowed")
	}
	if users.deleted[1] != "consumer-1" {
		t.Errorf("cleanup without a Liqo id falls back to the cluster id, got %v", users.deleted)
	}
}
