package bolt

import (
	"context"
	"path/filepath"
	"testing"
)

// TestSpendBookDurable: nothing stored reads as nil; the last stored book
// comes back after a reopen, and the broker's records are untouched.
func TestSpendBookDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	ctx := context.Background()
	s, err := OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadSpendBook(ctx); err != nil || got != nil {
		t.Fatalf("empty store: %q %v, want nil", got, err)
	}
	for _, v := range []string{`{"month":"2026-11"}`, `{"month":"2026-12"}`} {
		if err := s.StoreSpendBook(ctx, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenFile(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.LoadSpendBook(ctx); err != nil || string(got) != `{"month":"2026-12"}` {
		t.Fatalf("after reopen: %q %v, want the last book stored", got, err)
	}
	if snap, err := s.Load(ctx); err != nil || len(snap.Reservations)+len(snap.Consumers) != 0 {
		t.Errorf("Load after the spend book: %+v %v", snap, err)
	}
}
