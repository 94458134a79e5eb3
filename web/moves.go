package web

import (
	"fmt"
	"sort"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/web/views"
)

// The broker's moves of manual reservations to a better provider
// (docs/placement.md, Migration), as the dashboard, its events log and the
// consumer console show them.

// migrationClass is the badge class of a move's state.
func migrationClass(state string) string {
	switch state {
	case api.MigrationFinished:
		return "ok"
	case api.MigrationFailed:
		return "bad"
	}
	return "warn" // moving, kept
}

// savingLabel renders what a move saves per hour ("0.0200 EUR/h · 3.0
// g/h"; "unknown" for a metric either provider lacks).
func savingLabel(cur string, s api.MigrationSaving) string {
	cost, co2 := "cost unknown", "carbon unknown"
	if s.CostPerHour != nil {
		cost = perHour(cur, *s.CostPerHour)
	}
	if s.CarbonPerHour != nil {
		co2 = fmt.Sprintf("%.1f g/h", *s.CarbonPerHour)
	}
	return cost + " · " + co2
}

// savingsLabel renders what a consumer's finished moves saved ("—" before
// the first).
func savingsLabel(cur string, s *api.MigrationSavings) string {
	if s == nil {
		return dash
	}
	return fmt.Sprintf("%d move(s) since %s: %s · %.1f g/h", s.Moves, s.Since.UTC().Format("2006-01-02 15:04"), perHour(cur, s.CostPerHour), s.CarbonPerHour)
}

// migrationRow renders one move of consumer.
func migrationRow(cur, consumer string, m api.Migration) views.MigrationRow {
	return views.MigrationRow{
		Consumer: consumer, Reservation: m.ReservationID, Target: m.TargetReservationID,
		From: m.From, To: m.To, Chunks: chunksLabel(m.ChunkCount, m.ChunkType),
		State: m.State, StateClass: migrationClass(m.State), Reason: m.Reason,
		Saving: savingLabel(cur, m.Saving), Started: clockTime(m.StartedAt.Time),
	}
}

// lastChange is when move m last changed: its end, or its start.
func lastChange(m api.Migration) time.Time {
	if m.EndedAt != nil {
		return m.EndedAt.Time
	}
	return m.StartedAt.Time
}

// migrationRows renders consumer's moves, newest first.
func migrationRows(cur, consumer string, ms []api.Migration) []views.MigrationRow {
	ms = append([]api.Migration(nil), ms...)
	sort.SliceStable(ms, func(i, j int) bool { return lastChange(ms[i]).After(lastChange(ms[j])) })
	out := make([]views.MigrationRow, 0, len(ms))
	for _, m := range ms {
		out = append(out, migrationRow(cur, consumer, m))
	}
	return out
}

// dashboardMigrations is every consumer's moves, newest first.
func dashboardMigrations(cur string, cs []api.OverviewConsumer) []views.MigrationRow {
	type row struct {
		consumer string
		m        api.Migration
	}
	var all []row
	for _, c := range cs {
		for _, m := range c.Migrations {
			all = append(all, row{c.ClusterID, m})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return lastChange(all[i].m).After(lastChange(all[j].m)) })
	out := make([]views.MigrationRow, 0, len(all))
	for _, r := range all {
		out = append(out, migrationRow(cur, r.consumer, r.m))
	}
	return out
}

// migrationEvents are the consumers' moves as events: one when a move
// starts (or is kept) and one when it ends.
func migrationEvents(cs []api.OverviewConsumer) []event {
	var out []event
	for _, c := range cs {
		for _, m := range c.Migrations {
			move := chunksLabel(m.ChunkCount, m.ChunkType) + " " + m.From + " → " + m.To + ", saves " + savingLabel("", m.Saving)
			base := "migration/" + c.ClusterID + "/" + m.ReservationID + "/" + m.StartedAt.UTC().Format(time.RFC3339Nano) + "/"
			text := move
			if m.State == api.MigrationKept {
				text += ": " + m.Reason
			}
			start := event{
				key: base + "started", at: m.StartedAt.Time, kind: "migration started", class: "warn",
				consumer: c.ClusterID, provider: m.From, subject: m.ReservationID, text: text,
			}
			switch m.State {
			case api.MigrationKept:
				start.key, start.kind = base+"kept/"+m.To, "migration kept"
				out = append(out, start)
				continue
			case api.MigrationMoving:
				out = append(out, start)
				continue
			}
			// An ended move: its start was an event too (the log keeps
			// it once seen; a broker restart does not replay it).
			out = append(out, start)
			if m.EndedAt != nil {
				out = append(out, event{
					key: base + m.State, at: m.EndedAt.Time, kind: "migration " + m.State, class: migrationClass(m.State),
					consumer: c.ClusterID, provider: m.To, subject: m.ReservationID, text: move + ": " + m.Reason,
				})
			}
		}
	}
	return out
}
