package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
)

func mtp(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// TestEventsAndInFlight: finished instructions and ended reservations move
// from their tables to the events log (newest first, bounded, kept after
// the broker forgot them); the in-flight tables keep only what is live.
func TestEventsAndInFlight(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	res := func(id string, phase api.Phase, created time.Time, ended *metav1.Time) api.OverviewReservation {
		return api.OverviewReservation{ReservationResponse: api.ReservationResponse{
			ReservationID: id, ConsumerClusterID: "lyon", ProviderClusterID: "paris", ChunkCount: 1, ChunkType: api.ChunkStandard,
			Status: phase, CreatedAt: metav1.NewTime(created),
		}, TerminatedAt: ended}
	}
	ov := api.Overview{
		Reservations: []api.OverviewReservation{
			res("r-live", api.PhasePeered, t0, nil),
			res("r-done", api.PhaseReleased, t0, mtp(t0.Add(2*time.Minute))),
			res("r-failed", api.PhaseFailed, t0, mtp(t0.Add(time.Minute))),
		},
		ProviderInstructions: []api.OverviewInstruction{
			{ID: "gk-1", Kind: api.KindGenerateKubeconfig, ReservationID: "r-done", TargetClusterID: "paris", Enforced: true, Attempts: 1, LastUpdateTime: mtp(t0.Add(30 * time.Second))},
		},
		ReservationInstructions: []api.OverviewInstruction{
			{ID: "peer-1", Kind: api.KindPeer, ReservationID: "r-live", TargetClusterID: "lyon", ConsumerClusterID: "lyon", ProviderClusterID: "paris", Attempts: 2},
		},
	}
	d := buildDashboard(t0.Add(3*time.Minute), ov, newHistory(0, 0), time.Minute, "EUR")
	if len(d.Reservations) != 1 || d.Reservations[0].ID != "r-live" {
		t.Errorf("reservations table %+v, want only the live r-live", d.Reservations)
	}
	if len(d.Instructions) != 1 || d.Instructions[0].ID != "peer-1" {
		t.Errorf("instructions in flight %+v, want only peer-1", d.Instructions)
	}

	log := newEventLog(3)
	log.record(ov)
	rows, consumers, providers := eventRows(log.snapshot())
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s/%s %s", r.At, r.Kind, r.Consumer, r.Provider, r.Subject))
	}
	want := "13:02:00 reservation Released lyon/paris r-done; 13:01:00 reservation Failed lyon/paris r-failed; 13:00:30 GenerateKubeconfig done /paris r-done"
	if strings.Join(got, "; ") != want {
		t.Errorf("events\n got %s\nwant %s", strings.Join(got, "; "), want)
	}
	if strings.Join(consumers, ",") != "lyon" || strings.Join(providers, ",") != "paris" {
		t.Errorf("filter suggestions %v %v", consumers, providers)
	}
	// The broker forgets them; a newer event pushes the oldest out.
	log.record(api.Overview{Reservations: []api.OverviewReservation{res("r-new", api.PhaseExpired, t0, mtp(t0.Add(5*time.Minute)))}})
	evs := log.snapshot()
	if len(evs) != 3 || evs[0].subject != "r-new" || evs[2].subject != "r-failed" {
		t.Errorf("after a 4th event: %+v, want r-new, r-done, r-failed (bounded to 3, newest first)", evs)
	}
}

// TestReevaluationEvents: each decision the broker reaches for a held
// group is one event (a decision kept over many runs is not repeated; a
// new one is another event), a move amber, a keep green.
func TestReevaluationEvents(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	dec := func(decision, target, reason string, at time.Time) api.Reevaluation {
		return api.Reevaluation{NodeGroupID: "ng-sydney-standard", ProviderClusterID: "sydney", ChunkType: api.ChunkStandard, Chunks: 2,
			Decision: decision, Target: target, Reason: reason, DecidedAt: metav1.NewTime(at)}
	}
	ov := func(d api.Reevaluation) api.Overview {
		return api.Overview{Consumers: []api.OverviewConsumer{{ClusterID: "lyon", Reevaluations: []api.Reevaluation{d}}}}
	}
	log := newEventLog(10)
	move := dec(api.DecisionMove, "montreal", "montreal is better by 0.03 per hour per chunk, more than the threshold of 0.01", t0)
	log.record(ov(move))
	log.record(ov(move)) // the same decision, re-evaluated: no new event
	log.record(ov(dec(api.DecisionKeep, "montreal", "montreal is better by only 0.005 per hour per chunk, not more than the threshold of 0.01", t0.Add(time.Minute))))
	rows, _, _ := eventRows(log.snapshot())
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %s/%s %s: %s", r.At, r.Kind, r.Class, r.Consumer, r.Provider, r.Subject, r.Text))
	}
	want := "13:01:00 re-evaluation keep ok lyon/sydney ng-sydney-standard: 2 × standard: montreal is better by only 0.005 per hour per chunk, not more than the threshold of 0.01; " +
		"13:00:00 re-evaluation move warn lyon/sydney ng-sydney-standard: 2 × standard: montreal is better by 0.03 per hour per chunk, more than the threshold of 0.01"
	if strings.Join(got, "; ") != want {
		t.Errorf("events\n got %s\nwant %s", strings.Join(got, "; "), want)
	}
}

// TestMigrationEvents: a move is an event when it starts and another when
// it ends (the start stays in the log after the broker shows it ended); a
// kept move is one event; the dashboard lists the moves newest first and
// shows the consumer's savings.
func TestMigrationEvents(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	cost, co2 := 0.034, -1.5
	move := api.Migration{
		ReservationID: "manual-1", TargetReservationID: "manual-1.m1", From: "sydney", To: "montreal",
		ChunkType: api.ChunkStandard, ChunkCount: 1, State: api.MigrationMoving, Reason: "montreal is better",
		Saving: api.MigrationSaving{CostPerHour: &cost, CarbonPerHour: &co2}, StartedAt: metav1.NewTime(t0),
	}
	kept := api.Migration{ReservationID: "manual-2", From: "sydney", To: "montreal", ChunkType: api.ChunkStandard, ChunkCount: 1,
		State: api.MigrationKept, Reason: "the disruption budget of 1 moves per 1h0m0s is used up", StartedAt: metav1.NewTime(t0.Add(time.Second))}
	ov := func(ms ...api.Migration) api.Overview {
		return api.Overview{Consumers: []api.OverviewConsumer{{ClusterID: "london", Migrations: ms,
			Savings: &api.MigrationSavings{Moves: 1, CostPerHour: cost, CarbonPerHour: co2, Since: metav1.NewTime(t0)}}}}
	}
	log := newEventLog(10)
	log.record(ov(move, kept))
	done := move
	done.State, done.Reason, done.EndedAt = api.MigrationFinished, "the target manual-1.m1 is Ready on montreal", mtp(t0.Add(time.Minute))
	log.record(ov(done, kept))
	var got []string
	for _, e := range log.snapshot() {
		got = append(got, e.kind+" "+e.subject+" "+e.class+": "+e.text)
	}
	want := []string{
		"migration finished manual-1 ok: 1 × standard sydney → montreal, saves 0.0340 /h · -1.5 g/h: the target manual-1.m1 is Ready on montreal",
		"migration kept manual-2 warn: 1 × standard sydney → montreal, saves cost unknown · carbon unknown: the disruption budget of 1 moves per 1h0m0s is used up",
		"migration started manual-1 warn: 1 × standard sydney → montreal, saves 0.0340 /h · -1.5 g/h",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	d := buildDashboard(t0.Add(2*time.Minute), ov(done, kept), newHistory(0, 0), time.Minute, "EUR")
	if len(d.Migrations) != 2 || d.Migrations[0].Reservation != "manual-1" || d.Migrations[0].StateClass != "ok" || d.Migrations[0].Saving != "0.0340 EUR/h · -1.5 g/h" {
		t.Fatalf("dashboard moves %+v, want the finished manual-1 first with its saving", d.Migrations)
	}
	if len(d.Consumers) != 1 || d.Consumers[0].Saved != "1 move(s) since 2026-12-01 13:00: 0.0340 EUR/h · -1.5 g/h" {
		t.Fatalf("consumers %+v, want london's savings", d.Consumers)
	}
}
