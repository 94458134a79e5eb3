package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHistoryBoundedAndDurable: records come back oldest first after a
// reopen, and AppendHistory drops what is older than its cut.
func TestHistoryBoundedAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.AppendHistory(ctx, at, []byte(fmt.Sprint(i)), at.Add(-3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	err = s.LoadHistory(ctx, func(at time.Time, data []byte) error {
		got = append(got, at.Format("15:04")+"="+string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "13:06=6 13:07=7 13:08=8 13:09=9"; strings.Join(got, " ") != want {
		t.Errorf("history %q, want %q (the last 3 minutes before the newest, kept across a reopen)", strings.Join(got, " "), want)
	}
	if snap, err := s.Load(ctx); err != nil || len(snap.Reservations)+len(snap.Consumers) != 0 {
		t.Errorf("Load after history: %+v %v", snap, err)
	}
}
