package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	fav1alpha1 "github.com/federation-autoscaler/federation-autoscaler/agent/apis/v1alpha1"
	"github.com/federation-autoscaler/federation-autoscaler/agent/consolidate"
	"github.com/federation-autoscaler/federation-autoscaler/mocks/demo/workload"
	"github.com/federation-autoscaler/federation-autoscaler/server/reservations"
)

// TestConsumerSettingsRoundTrip: what the consumer console changed comes
// back at the next start; a damaged file is refused with the path and what
// to do.
func TestConsumerSettingsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumer", "settings.yaml")
	if _, found, err := loadConsumerSettings(path); found || err != nil {
		t.Fatalf("no file: found %v, err %v; want nothing and no error", found, err)
	}
	want := consumerSettings{
		Policy: fav1alpha1.ConsumerPolicySpec{
			Placement: fav1alpha1.Placement{Type: fav1alpha1.PlacementWeighted, Weights: &fav1alpha1.PlacementWeights{Distance: 1}},
			Location:  &fav1alpha1.Location{City: "Sydney", Region: "NSW", Latitude: -33.8688, Longitude: 151.2093},
		},
		Workload: savedWorkloadOf(workload.Spec{Enabled: true, Replicas: 3, CPU: resource.MustParse("500m"), Memory: resource.MustParse("1Gi")}),
	}
	if err := want.write(path); err != nil {
		t.Fatal(err)
	}
	got, found, err := loadConsumerSettings(path)
	if err != nil || !found {
		t.Fatalf("load: found %v, err %v", found, err)
	}
	if got.Policy.Placement.Type != fav1alpha1.PlacementWeighted || got.Policy.Placement.Weights.Distance != 1 || *got.Policy.Location != *want.Policy.Location {
		t.Fatalf("policy %+v, want %+v", got.Policy, want.Policy)
	}
	if w := got.workload(); !w.Enabled || w.Replicas != 3 || w.CPU.Cmp(resource.MustParse("500m")) != 0 || w.Memory.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Fatalf("workload %+v", w)
	}
	for _, bad := range []string{"policy: {unknown: 1}\n", "workload: {enabled: true, replicas: -1, cpu: \"1\", memory: 1Gi}\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := loadConsumerSettings(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete the file") {
			t.Errorf("%q: error %v, want one naming %s and what to do", bad, err, path)
		}
	}
}

// TestLifecycleMovesOff: NoMigration and NoConsolidation give the broker
// and the consumer agents a move budget of 0; without them, their defaults.
func TestLifecycleMovesOff(t *testing.T) {
	if got := migrationBudget(Options{NoMigration: true}); got != 0 {
		t.Errorf("NoMigration: migration budget %d, want 0", got)
	}
	if got := migrationBudget(Options{}); got != reservations.DefaultMigrationBudget {
		t.Errorf("default migration budget %d, want the broker's %d", got, reservations.DefaultMigrationBudget)
	}
	off := consolidationBudget(Options{NoConsolidation: true})
	if off.Max != 0 || off.Window <= 0 {
		t.Errorf("NoConsolidation: budget %+v, want 0 moves per a positive window (a zero window means the default)", off)
	}
	if def := consolidationBudget(Options{}); def != (consolidate.Budget{}) {
		t.Errorf("default consolidation budget %+v, want the zero Budget (the agent's default)", def)
	}
}
