package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// spendBucket holds the broker's spend book (reservations.SpendStore): one
// record, apart from the broker's records (Load never reads it).
const spendBucket = "spend-book"

var spendKey = []byte("book")

// StoreSpendBook replaces the stored spend book with data.
func (s *Store) StoreSpendBook(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(spendBucket))
		if err != nil {
			return err
		}
		return b.Put(spendKey, append([]byte(nil), data...))
	})
	if err != nil {
		return fmt.Errorf("store the spend book: %w", err)
	}
	return nil
}

// LoadSpendBook returns the stored spend book (nil when none is stored).
func (s *Store) LoadSpendBook(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte(spendBucket)); b != nil {
			out = append([]byte(nil), b.Get(spendKey)...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load the spend book: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
