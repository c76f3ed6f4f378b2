package resp

import (
	"context"
	"time"

	"github.com/strata-db/strata/internal/pace"
)

// reapBatch is how many expiry-index entries one reaper transaction
// handles.
const reapBatch = 256

// reapIdleInterval is the longest wait between two passes of the reaper
// while it finds nothing due, and reapHold how long it stays at
// ReapInterval after a pass that found some.
const (
	reapIdleInterval = 2 * time.Second
	reapHold         = 5 * time.Second
)

// reapLoop reclaims expired keys in the background: every ReapInterval it
// walks the expiry index up to now and deletes each key whose metadata
// still carries that expiry (a key whose TTL was changed or removed since
// only loses its stale index entry). Reads never depend on it: an expired
// key is invisible as soon as its time passes. While passes find nothing
// due the interval doubles up to reapIdleInterval (package pace): an idle
// node does not read the expiry index ten times a second.
func (s *Server) reapLoop() {
	defer s.wg.Done()
	p := pace.New(s.cfg.ReapInterval, reapIdleInterval, reapHold)
	t := time.NewTimer(p.Interval())
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		found := false
		for {
			n, err := s.reapOnce()
			if err != nil {
				s.cfg.Logger.Debug("resp: reaping expired keys", "err", err)
				break
			}
			found = found || n > 0
			if n < reapBatch {
				break
			}
			select {
			case <-s.stop:
				return
			default:
			}
		}
		t.Reset(p.Next(found))
	}
}

// reapOnce deletes up to reapBatch due entries and returns how many it
// looked at.
func (s *Server) reapOnce() (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
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
