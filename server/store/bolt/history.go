package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// historyBucket holds the dashboard's history (web.HistoryStore): one
// record per sample time, keyed by big-endian Unix nanoseconds, apart from
// the broker's records (Load never reads it).
const historyBucket = "dashboard-history"

func historyKey(at time.Time) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, uint64(at.UnixNano()))
	return k
}

// AppendHistory stores one history record at time at and deletes every
// record older than keepAfter, in one transaction: the bucket never holds
// more than the caller's window.
func (s *Store) AppendHistory(ctx context.Context, at time.Time, data []byte, keepAfter time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(historyBucket))
		if err != nil {
			return err
		}
		c := b.Cursor()
		cut := historyKey(keepAfter)
		for k, _ := c.First(); k != nil && string(k) < string(cut); k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return b.Put(historyKey(at), append([]byte(nil), data...))
	})
	if err != nil {
		return fmt.Errorf("append dashboard history: %w", err)
	}
	return nil
}

// LoadHistory calls fn with every stored history record, oldest first.
func (s *Store) LoadHistory(ctx context.Context, fn func(at time.Time, data []byte) error) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(historyBucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if len(k) != 8 {
				return fmt.Errorf("dashboard history: key of %d bytes, want 8", len(k))
			}
			return fn(time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC(), append([]byte(nil), v...))
		})
	})
}
