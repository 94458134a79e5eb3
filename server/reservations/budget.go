package reservations

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/placement"
	"github.com/federation-autoscaler/federation-autoscaler/server/spend"
)

// DefaultSpendSampleEvery is Config.SpendSampleEvery's default: how often
// the spend book integrates every consumer's spend per hour.
const DefaultSpendSampleEvery = 10 * time.Second

// SpendStore keeps the spend book across restarts (the bbolt store
// implements it, in a bucket of its own). LoadSpendBook returns nil when
// nothing was stored.
type SpendStore interface {
	LoadSpendBook(ctx context.Context) ([]byte, error)
	StoreSpendBook(ctx context.Context, data []byte) error
}

// budgetRefusal is the last reservation a consumer's budget refused: the
// message, when, and the spend per hour then. The refusal stands (the
// budget shows as reached) until the spend goes below that rate, a
// reservation of the consumer is admitted (lifted), or the budget changes.
type budgetRefusal struct {
	msg             string
	at              time.Time
	rate            float64
	limit, provider string
	lifted          bool
}

// noteBudgeted records whether consumer cn (as c) has a budget.
func (s *Service) noteBudgeted(cn string, c *consumer) {
	if c.budget != nil {
		s.budgeted.Store(cn, true)
	} else {
		s.budgeted.Delete(cn)
	}
}

// loadSpendBook restores the stored spend book (an empty one when none is
// stored or it does not decode: the month starts again from what the
// consumers spend from now on, and the log says so).
func (s *Service) loadSpendBook() {
	if s.cfg.SpendStore == nil {
		return
	}
	data, err := s.cfg.SpendStore.LoadSpendBook(context.Background())
	if err == nil && len(data) > 0 {
		var b spend.Book
		if err = json.Unmarshal(data, &b); err == nil {
			s.book = b
			return
		}
	}
	if err != nil {
		s.log.Warn("Spend book not restored: what consumers spent today and this month starts from 0 (their budgets too)", "err", err)
	}
}

// sampleSpendLocked integrates every consumer's spend per hour into the
// book when a sample is due (or always, when force) and returns the book to
// store (nil when nothing was sampled or there is no SpendStore).
func (s *Service) sampleSpendLocked(now time.Time, next *wake, force bool) []byte {
	if !force && now.Before(s.spendAt) {
		if len(s.book.Rate) > 0 {
			next.soon(s.spendAt)
		}
		return nil
	}
	s.spendAt = now.Add(s.cfg.SpendSampleEvery)
	rates := map[string]float64{}
	for id := range s.st.consumers {
		if r := s.idx.Spend(id).CostPerHour; r > 0 {
			rates[id] = r
		}
	}
	if len(rates) > 0 || len(s.book.Rate) > 0 {
		s.version.Add(1) // the spend today and this month moved
	}
	s.book.Add(now, rates, spend.DefaultMaxGap)
	if len(rates) > 0 {
		// Nobody spending: no wake-up (a consumer that starts spending
		// asks for a sample, startedSpendingLocked).
		next.soon(s.spendAt)
	}
	if s.cfg.SpendStore == nil {
		return nil
	}
	data, err := json.Marshal(s.book)
	if err != nil {
		s.log.Error("Spend book not encoded", "err", err)
		return nil
	}
	return data
}

// admittedLocked notes a reservation of consumer cn admitted: a budget
// refusal stands no more, and a consumer that was not spending at the last
// spend sample asks for one at the next sweep, now, so the book counts its
// spend from then on (the periodic samples only run while someone spends).
func (s *Service) admittedLocked(cn string) {
	if r := s.refusals[cn]; r != nil {
		r.lifted = true
	}
	if s.book.Rate[cn] == 0 {
		s.spendAt = s.clock.Now()
		s.kickSweep()
	}
}

// storeSpendBook stores data from sampleSpendLocked (outside the mutex).
func (s *Service) storeSpendBook(data []byte) {
	if data == nil {
		return
	}
	if err := s.cfg.SpendStore.StoreSpendBook(context.Background(), data); err != nil {
		s.log.Warn("Spend book not stored; the next sample retries", "err", err)
	}
}

// usageLocked is consumer cn's spend as its budget reads it at now.
func (s *Service) usageLocked(cn string, now time.Time) spend.Usage {
	return spend.UsageAt(&s.book, cn, s.idx.Spend(cn).CostPerHour, now, spend.DefaultMaxGap)
}

// admitBudgetLocked refuses req when it would break consumer cn's budget
// (409 BudgetExceeded) and records the refusal for the consoles. An
// unpriced provider's chunks cost 0 (docs/placement.md, Budgets).
func (s *Service) admitBudgetLocked(cn string, c *consumer, req api.ReservationRequest, now time.Time) error {
	if c.budget == nil {
		return nil
	}
	add, _ := s.idx.ChunkCost(req.ProviderClusterID, req.ChunkType, req.ChunkCount)
	u := s.usageLocked(cn, now)
	r := c.budget.Check(u, add)
	if r == nil {
		return nil
	}
	s.noteRefusalLocked(cn, r, req.ProviderClusterID, u, now)
	return api.Errorf(api.CodeBudgetExceeded, "%s", r.Message(cn)).WithDetails(r.Details())
}

// noteRefusalLocked records that consumer cn's budget refused a chunk on
// provider, logs it and signals the consoles, unless the same refusal
// stands already (same limit and provider at the same spend per hour: a
// projected month that moved a little is no news).
func (s *Service) noteRefusalLocked(cn string, r *spend.Refusal, provider string, u spend.Usage, now time.Time) {
	if old := s.refusals[cn]; old != nil && !old.lifted && old.limit == r.Limit && old.provider == provider && old.rate == u.Rate {
		return
	}
	s.log.Info("Scale-up refused: it would break the consumer's budget", "consumer", cn, "provider", provider,
		"limit", r.Limit, "budget", r.Budget, "current", r.Current, "cost", r.Cost)
	s.refusals[cn] = &budgetRefusal{msg: r.Message(cn), at: now, rate: u.Rate, limit: r.Limit, provider: provider}
	s.notify() // the consoles show the refusal
}

// budgetStatusLocked is consumer cn's spend against its budget (nil when
// it has none).
func (s *Service) budgetStatusLocked(cn string, c *consumer, now time.Time) *api.BudgetStatus {
	if c == nil || c.budget == nil {
		return nil
	}
	u := s.usageLocked(cn, now)
	ref := s.refusals[cn]
	st := c.budget.Status(u, ref != nil && !ref.lifted && u.Rate >= ref.rate-1e-9)
	if ref != nil {
		st.LastRefusal, st.LastRefusalAt = ref.msg, mtp(&ref.at)
	}
	return &st
}

// capToBudgetLocked lowers the max size of every group of v whose next
// chunks would break consumer cn's budget to what the budget affords (the
// Cluster Autoscaler then never asks for them), and sets v.Budget. In the
// policy's view (all false: the one the Cluster Autoscaler reads), a group
// the policy would grow that the budget stops entirely is recorded as a
// refusal, with the reason a reservation there would get.
func (s *Service) capToBudgetLocked(cn string, v *api.NodeGroupListResponse, all bool, now time.Time) {
	c := s.st.consumers[cn]
	if c == nil || c.budget == nil {
		return
	}
	u := s.usageLocked(cn, now)
	capped := false
	for i := range v.NodeGroups {
		g := &v.NodeGroups[i]
		perChunk, _ := s.idx.ChunkCost(g.ProviderClusterID, g.Type, 1)
		n, ok := c.budget.Affordable(u, perChunk)
		if !ok {
			continue
		}
		most := int32(min(int64(g.CurrentReserved)+int64(n), math.MaxInt32))
		if most >= g.MaxSize {
			continue
		}
		if n == 0 && !all {
			if r := c.budget.Check(u, perChunk); r != nil {
				s.noteRefusalLocked(cn, r, g.ProviderClusterID, u, now)
			}
		}
		g.MaxSize, capped = most, true
	}
	if capped {
		placement.Restamp(v)
	}
	v.Budget = s.budgetStatusLocked(cn, c, now)
}

// consumerSpendLocked is what consumer cn's borrowed chunks cost and emit
// now, and what it spent today and this month (the book).
func (s *Service) consumerSpendLocked(cn string, now time.Time) api.ConsumerSpend {
	sp := s.idx.Spend(cn)
	sp.SpentToday, sp.SpentThisMonth = s.book.SpentAt(cn, now, spend.DefaultMaxGap)
	return sp
}
