// Package bolt is the embedded store.Store of the broker: one bbolt file in
// the broker's data directory, one bucket per record kind, each record a
// versioned JSON document. Apply commits one read-write transaction and
// fsyncs it before returning; the broker's domain groups concurrent
// mutations into one Apply (group commit), so throughput does not depend on
// one fsync per request.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/federation-autoscaler/federation-autoscaler/server/store"
)

// FileName is the database file inside the data directory.
const FileName = "broker.db"

// recordVersion prefixes every stored value; a value with another prefix is
// refused at load.
const recordVersion byte = 1

// Mutation is store.Mutation, aliased for brevity.
type Mutation = store.Mutation

// Store is a bbolt-backed store.Store.
type Store struct {
	db *bbolt.DB
}

var _ store.Store = (*Store)(nil)

// Options tune Open.
type Options struct {
	// Timeout bounds the wait for the file lock held by another process
	// (default 5s).
	Timeout time.Duration
	// NoSync disables fsync; only for tests that measure something else.
	NoSync bool
	// ResetDamaged, when the file is damaged (a *DamagedError), moves it
	// aside to <file>.damaged-<UTC time> and starts an empty store instead
	// of refusing to open. The damaged file is never deleted.
	ResetDamaged bool
	// OnReset, when set, is told where a damaged file was moved and why.
	OnReset func(movedTo string, cause *DamagedError)
}

// Open opens (creating if needed) the store in directory dir.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open store: empty data directory; set --data-dir")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: creating data directory %s: %w", dir, err)
	}
	return OpenFile(filepath.Join(dir, FileName), opts)
}

// OpenFile opens (creating if needed) the store in file path. An existing
// file is checked before use: its meta pages, size and every page of its
// tree, with plain reads before bbolt maps it (checkFile). A damaged one is
// refused with a *DamagedError, or moved aside with ResetDamaged.
func OpenFile(path string, opts Options) (*Store, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	s, err := openChecked(path, opts)
	var de *DamagedError
	if err == nil || !opts.ResetDamaged || !errors.As(err, &de) {
		return s, err
	}
	lock, err := lockFile(path, opts.Timeout)
	if err != nil {
		return nil, err
	}
	movedTo, err := moveAside(path, time.Now())
	if lock != nil {
		_ = lock.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, de)
	}
	if opts.OnReset != nil {
		opts.OnReset(movedTo, de)
	}
	return openChecked(path, opts)
}

func openChecked(path string, opts Options) (*Store, error) {
	lock, err := lockFile(path, opts.Timeout)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		err = checkFile(path)
		_ = lock.Close()
		if err != nil {
			return nil, err
		}
	}
	db, err := openBolt(path, opts)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, k := range store.Kinds() {
			if _, err := tx.CreateBucketIfNotExists([]byte(k.String())); err != nil {
				return fmt.Errorf("creating bucket %s: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// openBolt opens path read-write. A panic (bbolt's freelist rebuild found
// what checkFile did not) becomes a *DamagedError; the half-open database
// is left alone, not closed: a goroutine bbolt started may still read its
// mapping.
func openBolt(path string, opts Options) (db *bbolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, damaged(path, "bbolt failed reading it: %v", r)
		}
	}()
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync, NoFreelistSync: true})
	if err != nil {
		return nil, openError(path, err)
	}
	return db, nil
}

// openError explains an error of bbolt.Open.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s (is another broker using this data dir?): %w", path, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return damaged(path, "bbolt refused it: %v", err)
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Apply implements store.Store: one transaction, fsynced on commit.
func (s *Store) Apply(ctx context.Context, batch []Mutation) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	type enc struct {
		m   Mutation
		val []byte
	}
	encoded := make([]enc, len(batch))
	for i, m := range batch {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		encoded[i].m = m
		if !m.Delete {
			v, err := EncodeRecord(m)
			if err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			encoded[i].val = v
		}
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, e := range encoded {
			b := tx.Bucket([]byte(e.m.Kind.String()))
			if b == nil {
				return fmt.Errorf("bucket %s missing", e.m.Kind)
			}
			var err error
			if e.m.Delete {
				err = b.Delete([]byte(e.m.Key))
			} else {
				err = b.Put([]byte(e.m.Key), e.val)
			}
			if err != nil {
				return fmt.Errorf("writing %s %q: %w", e.m.Kind, e.m.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply %d mutations: %w", len(batch), err)
	}
	return nil
}

// Load implements store.Store.
func (s *Store) Load(ctx context.Context) (store.Snapshot, error) {
	var snap store.Snapshot
	err := s.db.View(func(tx *bbolt.Tx) error {
		for _, k := range store.Kinds() {
			b := tx.Bucket([]byte(k.String()))
			if b == nil {
				continue
			}
			err := b.ForEach(func(key, val []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				m, err := DecodeRecord(k, val)
				if err != nil {
					return fmt.Errorf("%s %q: %w", k, key, err)
				}
				snap.Add(m)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("load store: %w", err)
	}
	return snap, nil
}

// EncodeRecord encodes the record of put mutation m: the version byte,
// then store.MarshalRecord's JSON.
func EncodeRecord(m Mutation) ([]byte, error) {
	b, err := store.MarshalRecord(m)
	if err != nil {
		return nil, err
	}
	return append([]byte{recordVersion}, b...), nil
}

// DecodeRecord decodes a stored value of kind k into a put mutation. It
// refuses unknown versions, malformed JSON and records without their key
// fields (store.UnmarshalRecord).
func DecodeRecord(k store.Kind, val []byte) (Mutation, error) {
	if len(val) == 0 {
		return Mutation{}, errors.New("decode: empty record")
	}
	if val[0] != recordVersion {
		return Mutation{}, fmt.Errorf("decode: record version %d, this broker reads %d", val[0], recordVersion)
	}
	return store.UnmarshalRecord(k, val[1:])
}
