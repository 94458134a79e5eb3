package api

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Migration of manual reservations (extension): when a re-evaluation
// decision says "move" for a group a consumer holds a manual reservation
// in, the broker reserves the same chunks on the better provider first,
// waits for the consumer's virtual node there, then releases the old one
// (docs/placement.md, Migration).

// IsManualReservation reports whether reservation id was made by hand (the
// consumer console's manual-…, or any id the local API was given that
// lacks ReservationIDPrefix), not by the adapter for the Cluster
// Autoscaler. Only manual reservations are migrated by the broker; the
// autoscaled ones move through the Cluster Autoscaler.
func IsManualReservation(id string) bool { return !strings.HasPrefix(id, ReservationIDPrefix) }

// migrationSuffix separates a reservation id from its migration number.
const migrationSuffix = ".m"

// MigrationID is the id of attempt n (from 1) at moving reservation id:
// <base>.m<k>, where base is id without its own migration number and k
// that number plus n. It is derived from id alone, so a broker that
// restarts or replays a move never makes two targets; a reservation moved
// again continues its line (manual-x → manual-x.m1 → manual-x.m2), and a
// later attempt never reuses the id of an earlier one.
func MigrationID(id string, n int) string {
	base, k := id, 0
	if i := strings.LastIndex(id, migrationSuffix); i > 0 {
		if v, err := strconv.Atoi(id[i+len(migrationSuffix):]); err == nil && v > 0 && strconv.Itoa(v) == id[i+len(migrationSuffix):] {
			base, k = id[:i], v
		}
	}
	return base + migrationSuffix + strconv.Itoa(k+n)
}

// Migration states.
const (
	// MigrationMoving: the target is reserved; the old reservation is
	// kept until the target's virtual node is Ready.
	MigrationMoving = "moving"
	// MigrationFinished: the target is Ready and the old reservation was
	// released.
	MigrationFinished = "finished"
	// MigrationFailed: the target failed or timed out and was released;
	// the old reservation is untouched.
	MigrationFailed = "failed"
	// MigrationKept: a move was decided but not started (the disruption
	// budget is used up, or the target refused the reservation).
	MigrationKept = "kept"
)

// MigrationBudget is a consumer's one disruption budget of moves (the
// heartbeat's lifecycle.migrations, from its ConsumerPolicy): at most
// MaxPerWindow moves start in any WindowSeconds, the broker's migrations of
// manual reservations and the agent's consolidations of autoscaled capacity
// counted together. Nil fields take the deprecated aliases
// Lifecycle.MaxMovesPerWindow / MoveWindowSeconds, else the broker's
// --migration-budget and --migration-window; MaxPerWindow 0 turns every
// move off for the consumer.
type MigrationBudget struct {
	MaxPerWindow  *int32 `json:"maxPerWindow,omitempty"`
	WindowSeconds *int32 `json:"windowSeconds,omitempty"`
}

// Limits of MigrationBudget.
const (
	// MaxMigrationsPerWindow is the highest maxPerWindow.
	MaxMigrationsPerWindow = 1000
	// MaxMigrationWindowSeconds is the longest windowSeconds: one week.
	MaxMigrationWindowSeconds = 604800
)

// Check checks the budget: maxPerWindow from 0 to MaxMigrationsPerWindow,
// windowSeconds from 1 to MaxMigrationWindowSeconds.
func (b *MigrationBudget) Check(field string) *FieldError {
	if b == nil {
		return nil
	}
	if n := b.MaxPerWindow; n != nil && (*n < 0 || *n > MaxMigrationsPerWindow) {
		return fieldErr(join(field, "maxPerWindow"), showInt(int64(*n)), "from 0 (no migration) to "+strconv.Itoa(MaxMigrationsPerWindow))
	}
	if w := b.WindowSeconds; w != nil && (*w < 1 || *w > MaxMigrationWindowSeconds) {
		return fieldErr(join(field, "windowSeconds"), showInt(int64(*w)), "from 1 to "+strconv.Itoa(MaxMigrationWindowSeconds)+" seconds")
	}
	return nil
}

// MigrationSaving is what a move saves per hour for the whole reservation:
// the old provider's cost and carbon per hour minus the target's (negative
// when the target is worse on that metric; absent when either provider
// lacks it), as the broker saw them when the move started.
type MigrationSaving struct {
	CostPerHour   *float64 `json:"costPerHour,omitempty"`
	CarbonPerHour *float64 `json:"carbonPerHour,omitempty"`
}

// Migration is one move of a manual reservation, as the overview and the
// heartbeat response show it.
type Migration struct {
	// ReservationID is the reservation being moved; Target the new one
	// ("" for a kept move).
	ReservationID       string    `json:"reservationId"`
	TargetReservationID string    `json:"targetReservationId,omitempty"`
	From                string    `json:"fromProviderClusterId"`
	To                  string    `json:"toProviderClusterId,omitempty"`
	ChunkType           ChunkType `json:"chunkType"`
	ChunkCount          int32     `json:"chunkCount"`
	// State is MigrationMoving, MigrationFinished, MigrationFailed or
	// MigrationKept; Reason says why, in words.
	State  string          `json:"state"`
	Reason string          `json:"reason"`
	Saving MigrationSaving `json:"saving"`
	// StartedAt is when the move started (a kept move: when it was kept);
	// Deadline when a moving target times out; EndedAt when it ended.
	StartedAt metav1.Time  `json:"startedAt"`
	Deadline  *metav1.Time `json:"deadline,omitempty"`
	EndedAt   *metav1.Time `json:"endedAt,omitempty"`
}

// MigrationSavings is what a consumer's finished moves saved, summed since
// its first move (durable across broker restarts): per hour, as each move
// saved when it started.
type MigrationSavings struct {
	Moves         int32       `json:"moves"`
	CostPerHour   float64     `json:"costPerHour"`
	CarbonPerHour float64     `json:"carbonPerHour"`
	Since         metav1.Time `json:"since"`
}
