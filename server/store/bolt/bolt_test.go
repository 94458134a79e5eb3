package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/federation-autoscaler/federation-autoscaler/server/api"
	"github.com/federation-autoscaler/federation-autoscaler/server/store"
	"github.com/federation-autoscaler/federation-autoscaler/server/store/storetest"
)

func TestApplyRejectsMalformedMutations(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &store.Reservation{ID: "r"}
	for name, m := range map[string]store.Mutation{
		"empty key":       {Kind: store.KindReservation, Reservation: r},
		"no record":       {Kind: store.KindReservation, Key: "r"},
		"wrong kind":      {Kind: store.KindInstruction, Key: "r", Reservation: r},
		"delete + record": {Kind: store.KindReservation, Key: "r", Delete: true, Reservation: r},
	} {
		if err := s.Apply(context.Background(), []store.Mutation{m}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	snap, _ := s.Load(context.Background())
	if len(snap.Reservations) != 0 {
		t.Fatal("a rejected batch was written")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("", Options{}); err == nil {
		t.Fatal("empty dir accepted")
	}
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The file lock keeps a second broker out.
	if _, err := Open(dir, Options{Timeout: 50 * time.Millisecond}); err == nil {
		t.Fatal("second open of a locked store succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Apply(ctx, []store.Mutation{store.Delete(store.KindReservation, "x")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled apply: %v", err)
	}
}

func TestDecodeRecordRefuses(t *testing.T) {
	for name, val := range map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{9}, `{"id":"r","consumerId":"c","providerId":"p"}`...),
		"json":        append([]byte{recordVersion}, `{"id":`...),
		"missing ids": append([]byte{recordVersion}, `{"id":"r"}`...),
	} {
		if _, err := DecodeRecord(store.KindReservation, val); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeRecord checks that no stored bytes crash the loader and that
// whatever decodes re-encodes to something that decodes the same way.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(uint8(store.KindReservation), append([]byte{recordVersion}, `{"id":"r","consumerId":"c","providerId":"p","phase":"Peered"}`...))
	f.Add(uint8(store.KindInstruction), append([]byte{recordVersion}, `{"id":"gk.c.p","kind":"GenerateKubeconfig","targetId":"p","reservationIds":["a","b"]}`...))
	f.Add(uint8(store.KindCredential), append([]byte{recordVersion}, `{"consumerId":"c","providerId":"p","kubeconfig":"x"}`...))
	f.Add(uint8(store.KindAdvertisement), append([]byte{recordVersion}, `{"request":{"clusterId":"p","resources":{"cpu":"4"}}}`...))
	f.Add(uint8(store.KindConsumer), append([]byte{recordVersion}, `{"heartbeat":{"clusterId":"c"}}`...))
	f.Add(uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, kind uint8, val []byte) {
		m, err := DecodeRecord(store.Kind(kind), val)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded an invalid mutation: %v", err)
		}
		enc, err := EncodeRecord(m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, err := DecodeRecord(store.Kind(kind), enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if m2.Key != m.Key {
			t.Fatalf("key changed: %q → %q", m.Key, m2.Key)
		}
	})
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) store.Store {
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// FuzzOpenDamaged: a broker.db whose pages past the two metas are
// overwritten with arbitrary bytes (the meta pages stay valid, so only the
// page check can tell) is either refused with a *DamagedError or opens and
// loads without a crash: bbolt itself would fault (SIGBUS, SIGSEGV) or
// panic on a goroutine, which ends the fuzz worker.
func FuzzOpenDamaged(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		f.Fatal(err)
	}
	var batch []Mutation
	for i := range 40 {
		batch = append(batch, store.PutReservation(store.Reservation{
			ID: fmt.Sprintf("res-%03d", i), ConsumerID: "c1", ProviderID: "p1", ChunkType: api.ChunkStandard, ChunkCount: 1,
			Phase: api.PhasePeered, CreatedAt: time.Unix(1764547200, 0).UTC(),
		}))
	}
	if err := s.Apply(context.Background(), batch); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		f.Fatal(err)
	}
	ps := os.Getpagesize()
	if len(base) < 4*ps {
		f.Fatalf("the base database has %d bytes, want at least 4 pages", len(base))
	}
	f.Add(uint32(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint32(ps), []byte{2, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 1, 0})
	f.Add(uint32(16), bytes.Repeat([]byte{0x41}, 64))
	f.Fuzz(func(t *testing.T, off uint32, patch []byte) {
		img := slices.Clone(base)
		at := 2*ps + int(off%uint32(len(img)-2*ps))
		copy(img[at:], patch)
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFile(path, Options{})
		if err != nil {
			var de *DamagedError
			if !errors.As(err, &de) {
				t.Fatalf("a damaged file refused without a *DamagedError: %v", err)
			}
			return
		}
		defer s.Close()
		_, _ = s.Load(context.Background()) // a record that does not decode is an error, not a crash
	})
}
