package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

var at = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fill writes n reservations, n instructions and n/10 advertisements and
// consumers shaped like the broker's, in batches like its group commit.
func fill(tb testing.TB, s *Store, n int) {
	tb.Helper()
	var batch []store.Mutation
	flush := func() {
		if err := s.Apply(context.Background(), batch); err != nil {
			tb.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range n {
		id := fmt.Sprintf("res-%08d-4c1e-9a55-%012d", i, i)
		c, p := fmt.Sprintf("consumer-%03d", i%100), fmt.Sprintf("provider-%03d", i%37)
		batch = append(batch,
			store.PutReservation(store.Reservation{
				ID: id, ConsumerID: c, ConsumerLiqoID: "liqo-" + c, ProviderID: p, ProviderLiqoID: "liqo-" + p,
				ChunkType: api.ChunkStandard, ChunkCount: 1, Namespaces: []string{"default", "batch"},
				Phase: api.PhasePeered, PeeringStarted: true, VirtualNodeNames: []string{"liqo-" + p + "-" + id},
				CreatedAt: at, History: []store.Transition{
					{Phase: api.PhasePending, At: at, Message: "created"},
					{Phase: api.PhaseGeneratingKubeconfig, At: at}, {Phase: api.PhaseKubeconfigReady, At: at},
					{Phase: api.PhasePeering, At: at}, {Phase: api.PhasePeered, At: at},
				},
			}),
			store.PutInstruction(store.Instruction{
				ID: "peer." + id, Kind: api.KindPeer, Flavour: store.FlavourReservation, Seq: uint64(i),
				TargetID: c, ReservationID: id, IssuedAt: at, LastUpdate: at,
			}))
		if i%10 == 0 {
			batch = append(batch,
				store.PutAdvertisement(store.Advertisement{Request: api.AdvertisementRequest{ClusterID: p, LiqoClusterID: "liqo-" + p}, LastSeen: at}),
				store.PutConsumer(store.Consumer{Heartbeat: api.HeartbeatRequest{ClusterID: c, LiqoClusterID: "liqo-" + c}, LastSeen: at}))
		}
		if len(batch) >= 64 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// goodDB returns a closed, intact database of n reservations, the ids of
// the pages that hold its buckets (branch and leaf pages), its page size
// and the size of the pages in use (the file is longer: bbolt grows it
// ahead).
func goodDB(tb testing.TB, n int) (path string, treePages []int, pageSize int, inUse int64) {
	tb.Helper()
	path = filepath.Join(tb.TempDir(), FileName)
	s, err := OpenFile(path, Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	fill(tb, s, n)
	// A write transaction loads the freelist, which Tx.Page needs.
	_ = s.db.Update(func(*bbolt.Tx) error { return nil })
	err = s.db.View(func(tx *bbolt.Tx) error {
		pageSize, inUse = tx.DB().Info().PageSize, tx.Size()
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				return nil
			}
			if info.Type == "leaf" || info.Type == "branch" {
				treePages = append(treePages, id)
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return path, treePages, pageSize, inUse
}

func copyFile(tb testing.TB, from string) string {
	tb.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		tb.Fatal(err)
	}
	to := filepath.Join(tb.TempDir(), FileName)
	if err := os.WriteFile(to, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return to
}

// damageSeeds is how many random damages of each kind a run tries (400 of
// each were run once while writing the checks: all refused, none crashed).
const damageSeeds = 25

// TestDamagedFilesAreRefused damages real database files and checks that
// each is refused with a *DamagedError that says what is wrong — never a
// panic, a SIGBUS or an empty store — and that the file is left as it was.
func TestDamagedFilesAreRefused(t *testing.T) {
	good, tree, ps, inUse := goodDB(t, 1500)
	st, _ := os.Stat(good)
	t.Logf("database: %d bytes, %d in use, %d tree pages of %d bytes", st.Size(), inUse, len(tree), ps)
	overwrite := func(path string, off int64, b []byte) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	randomPage := func(r *rand.Rand) []byte {
		b := make([]byte, ps)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	type damageCase struct {
		name   string
		damage func(path string)
		want   string
	}
	tests := []damageCase{
		{"zero bytes", func(p string) { _ = os.Truncate(p, 0) }, "empty (0 bytes)"},
		{"a few bytes", func(p string) { _ = os.Truncate(p, 40) }, "too short"},
		{"truncated to half", func(p string) { _ = os.Truncate(p, inUse/2) }, "truncated"},
		{"truncated by one page", func(p string) { _ = os.Truncate(p, inUse-int64(ps)) }, "truncated"},
		{"truncated to the metas", func(p string) { _ = os.Truncate(p, int64(2*ps)) }, "truncated"},
		{"not a database", func(p string) { _ = os.WriteFile(p, bytes.Repeat([]byte("not a bbolt file\n"), 1000), 0o600) }, "neither meta page is valid"},
		{"both metas overwritten", func(p string) {
			r := rand.New(rand.NewPCG(1, 2))
			overwrite(p, 0, randomPage(r))
			overwrite(p, int64(ps), randomPage(r))
		}, "neither meta page is valid"},
	}
	for seed := range uint64(damageSeeds) {
		tests = append(tests, damageCase{fmt.Sprintf("random tree pages (seed %d)", seed), func(p string) {
			r := rand.New(rand.NewPCG(seed, 99))
			for range 1 + seed%3 {
				overwrite(p, int64(tree[r.IntN(len(tree))])*int64(ps), randomPage(r))
			}
		}, "damaged"})
	}
	// Bodies only: the header (id, flags, count) stays, so the damage gets
	// past bbolt's page-id assertion into elements and keys.
	for seed := range uint64(damageSeeds) {
		tests = append(tests, damageCase{fmt.Sprintf("random tree page bodies (seed %d)", seed), func(p string) {
			r := rand.New(rand.NewPCG(seed, 7))
			off := int64(tree[r.IntN(len(tree))]) * int64(ps)
			body := randomPage(r)[:ps-16]
			// Keep the first element header of a leaf (flags, pos, ksize,
			// vsize) sane sometimes, so keys point inside the page.
			overwrite(p, off+16+int64(r.IntN(64)), body[:ps-16-64])
		}, "damaged"})
	}
	// A page header that claims an overflow past the end, and a branch
	// element pointing far outside the file: both fault if dereferenced.
	tests = append(tests, damageCase{"tree page pointing outside the file", func(p string) {
		for _, id := range tree {
			hdr := make([]byte, 16)
			f, _ := os.Open(p)
			_, _ = f.ReadAt(hdr, int64(id*ps))
			f.Close()
			if hdr[8] == 0x01 { // a branch page: aim its first child far away
				overwrite(p, int64(id*ps)+16+8, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0})
				return
			}
		}
		t.Fatal("no branch page in the test database")
	}, "damaged"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := copyFile(t, good)
			tc.damage(p)
			before, _ := os.ReadFile(p)
			s, err := OpenFile(p, Options{Timeout: time.Second})
			if err == nil {
				snap, lerr := s.Load(context.Background())
				_ = s.Close()
				t.Fatalf("a damaged file opened (load: %d reservations, %v)", len(snap.Reservations), lerr)
			}
			var de *DamagedError
			if !errors.As(err, &de) || de.Path != p || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v (%T), want a *DamagedError for %s saying %q", err, err, p, tc.want)
			}
			after, _ := os.ReadFile(p)
			if !bytes.Equal(before, after) {
				t.Fatal("refusing the file changed it")
			}
		})
	}
}

// TestUnusedTailMayBeCut: bbolt grows its file ahead of use; losing the
// unused tail (a copy that skipped it) loses nothing and is not damage.
func TestUnusedTailMayBeCut(t *testing.T) {
	good, _, _, inUse := goodDB(t, 300)
	p := copyFile(t, good)
	if err := os.Truncate(p, inUse); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if snap, err := s.Load(context.Background()); err != nil || len(snap.Reservations) != 300 {
		t.Fatalf("%d reservations, %v", len(snap.Reservations), err)
	}
}

// TestOneDamagedMetaFallsBack: a torn write of one meta page is what bbolt's
// two metas are for; the store opens with the other one.
func TestOneDamagedMetaFallsBack(t *testing.T) {
	good, _, ps, _ := goodDB(t, 100)
	p := copyFile(t, good)
	for _, page := range []int{0, 1} {
		f, _ := os.OpenFile(p, os.O_RDWR, 0)
		meta := make([]byte, ps)
		_, _ = f.ReadAt(meta, int64(page*ps))
		_, _ = f.WriteAt(bytes.Repeat([]byte{0xAA}, 64), int64(page*ps)+16)
		f.Close()
		s, err := OpenFile(p, Options{})
		if err != nil {
			t.Fatalf("meta %d damaged: %v", page, err)
		}
		snap, err := s.Load(context.Background())
		_ = s.Close()
		if err != nil || len(snap.Reservations) == 0 {
			t.Fatalf("meta %d damaged: load %d reservations, %v", page, len(snap.Reservations), err)
		}
		p = copyFile(t, good)
	}
}

func TestResetDamagedMovesTheFileAside(t *testing.T) {
	good, _, _, _ := goodDB(t, 200)
	p := copyFile(t, good)
	if err := os.Truncate(p, 8192); err != nil {
		t.Fatal(err)
	}
	damagedBytes, _ := os.ReadFile(p)
	var movedTo string
	var cause *DamagedError
	s, err := OpenFile(p, Options{ResetDamaged: true, OnReset: func(to string, c *DamagedError) { movedTo, cause = to, c }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cause == nil || !strings.Contains(cause.Reason, "truncated") {
		t.Fatalf("OnReset cause %v, want the truncation", cause)
	}
	if filepath.Dir(movedTo) != filepath.Dir(p) || !strings.HasPrefix(filepath.Base(movedTo), FileName+".damaged-") {
		t.Fatalf("moved to %q, want %s.damaged-<time> next to it", movedTo, p)
	}
	kept, err := os.ReadFile(movedTo)
	if err != nil || !bytes.Equal(kept, damagedBytes) {
		t.Fatalf("the damaged file was not kept as it was (%v)", err)
	}
	snap, err := s.Load(context.Background())
	if err != nil || len(snap.Reservations) != 0 {
		t.Fatalf("the fresh store: %d reservations, %v", len(snap.Reservations), err)
	}

	// An intact store is opened as it is, even with ResetDamaged.
	p2 := copyFile(t, good)
	s2, err := OpenFile(p2, Options{ResetDamaged: true, OnReset: func(string, *DamagedError) { t.Error("an intact store was reset") }})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if snap, err := s2.Load(context.Background()); err != nil || len(snap.Reservations) != 200 {
		t.Fatalf("intact store: %d reservations, %v", len(snap.Reservations), err)
	}
	// And one another broker holds is never moved: the lock wait fails.
	if _, err := OpenFile(p2, Options{ResetDamaged: true, Timeout: 100 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "another broker") {
		t.Fatalf("second open of a locked store: %v", err)
	}
	if _, err := os.Stat(p2); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkOpenCheck measures opening an intact store of 20 000
// reservations and 20 000 instructions (~the file of a large federation)
// with the checks, against bbolt's bare open.
func BenchmarkOpenCheck(b *testing.B) {
	good, _, _, _ := goodDB(b, 20_000)
	st, _ := os.Stat(good)
	b.Logf("database: %.1f MiB", float64(st.Size())/(1<<20))
	b.Run("checked", func(b *testing.B) {
		for b.Loop() {
			s, err := OpenFile(good, Options{})
			if err != nil {
				b.Fatal(err)
			}
			_ = s.Close()
		}
	})
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			db, err := bbolt.Open(good, 0o600, &bbolt.Options{NoFreelistSync: true})
			if err != nil {
				b.Fatal(err)
			}
			_ = db.Update(func(*bbolt.Tx) error { return nil }) // loads the freelist like OpenFile's bucket creation
			_ = db.Close()
		}
	})
}
