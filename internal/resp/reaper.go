package resp

import (
	"context"
	"time"
)

// reapBatch is how many expiry-index entries one reaper transaction
// handles.
const reapBatch = 256

// reapLoop reclaims expired keys in the background: every ReapInterval it
// walks the expiry index up to now and deletes each key whose metadata
// still carries that expiry (a key whose TTL was changed or removed since
// only loses its stale index entry). Reads never depend on it: an expired
// key is invisible as soon as its time passes.
func (s *Server) reapLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for {
			n, err := s.reapOnce()
			if err != nil {
				s.cfg.Logger.Debug("resp: reaping expired keys", "err", err)
				break
			}
			if n < reapBatch {
				break
			}
			select {
			case <-s.stop:
				return
			default:
			}
		}
	}
}

// reapOnce deletes up to reapBatch due entries and returns how many it
// looked at.
func (s *Server) reapOnce() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommandTimeout)
	defer cancel()
	var seen int
	var reaped int64
	err := s.update(ctx, func(ks *keyspace) error {
		seen, reaped = 0, 0
		start, end := expirySpanUntil(ks.now)
		due, err := ks.txn.Scan(ks.ctx, start, end, reapBatch, false)
		if err != nil || len(due) == 0 {
			return err
		}
		seen = len(due)
		for _, e := range due {
			at, k, ok := decodeExpiryKey(e.Key)
			if !ok {
				continue
			}
			m, found, err := ks.lookupAny(k)
			if err != nil {
				return err
			}
			if found && m.expireAt == at {
				if err := ks.remove(k, m); err != nil {
					return err
				}
				reaped++
				continue
			}
			if err := ks.txn.Delete(e.Key); err != nil {
				return err
			}
			ks.wrote = true
		}
		return nil
	})
	if err == nil {
		s.stats.expired.Add(reaped)
	}
	return seen, err
}
