package resp

import (
	"bytes"
	"context"
	"errors"

	"github.com/strata-db/strata/internal/kv"
)

func init() {
	tx := []string{"@transaction"}
	register(
		&command{name: "multi", arity: 1, flags: flagNoQueue | flagFast | flagNoScript | flagLoading | flagStale, acl: tx, run: cmdMulti},
		&command{name: "exec", arity: 1, flags: flagNoQueue | flagNoScript | flagLoading | flagStale, acl: tx, run: cmdExec},
		&command{name: "discard", arity: 1, flags: flagNoQueue | flagFast | flagNoScript | flagLoading | flagStale, acl: tx, run: cmdDiscard},
		&command{name: "watch", arity: -2, flags: flagNoQueue | flagFast | flagNoScript | flagLoading | flagStale, firstKey: 1, lastKey: -1, step: 1, acl: tx, run: cmdWatch},
		&command{name: "unwatch", arity: 1, flags: flagFast | flagNoScript | flagLoading | flagStale, acl: tx, run: cmdUnwatch},
	)
}

// watchedKey is what WATCH saw of a key: whether it existed and the stamp
// (start timestamp of the transaction that last wrote it). EXEC aborts if
// either changed. A key that was created and deleted again between WATCH
// and EXEC looks unchanged; Redis would abort in that case.
type watchedKey struct {
	key   []byte
	live  bool
	stamp uint64
}

func cmdMulti(x *call) error {
	s := x.sess
	if s.inMulti {
		return replyError("ERR MULTI calls can not be nested")
	}
	s.inMulti, s.queued, s.queueErr = true, s.queued[:0], false
	x.w.WriteSimple("OK")
	return nil
}

func (s *session) endMulti() {
	s.inMulti, s.queued, s.queueErr, s.watched = false, nil, false, nil
}

func cmdDiscard(x *call) error {
	if !x.sess.inMulti {
		return replyError("ERR DISCARD without MULTI")
	}
	x.sess.endMulti()
	x.w.WriteSimple("OK")
	return nil
}

func cmdWatch(x *call) error {
	s := x.sess
	if s.inMulti {
		return replyError("ERR WATCH inside MULTI is not allowed")
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, s.srv.cfg.CommandTimeout)
	defer cancel()
	var seen []watchedKey
	err := s.srv.retry(ctx, func() error {
		seen = seen[:0]
		return s.srv.attempt(ctx, func(ks *keyspace) (bool, error) {
			for _, k := range x.args[1:] {
				m, ok, err := ks.lookup(k)
				if err != nil {
					return false, err
				}
				seen = append(seen, watchedKey{key: append([]byte(nil), k...), live: ok, stamp: m.stamp})
			}
			return false, nil
		})
	})
	if err != nil {
		return err
	}
	s.watched = append(s.watched, seen...)
	x.w.WriteSimple("OK")
	return nil
}

func cmdUnwatch(x *call) error {
	x.sess.watched = nil
	x.w.WriteSimple("OK")
	return nil
}

// cmdExec runs the queued commands as one transaction. Replies go out
// only once it committed; a write conflict with another client runs the
// whole batch again on a new snapshot (unless a watched key changed: then
// EXEC replies nil, as Redis does). A command failing at run time (say
// WRONGTYPE) gets its error reply and the others still run, as in Redis;
// the failing command itself changes nothing. So does one the ACL rules
// no longer allow.
func cmdExec(x *call) error {
	s := x.sess
	if !s.inMulti {
		return replyError("ERR EXEC without MULTI")
	}
	queued, watched, queueErr := s.queued, s.watched, s.queueErr
	s.endMulti()
	if queueErr {
		return replyError("EXECABORT Transaction discarded because of previous errors.")
	}
	// ACL rules are checked again, as they may have changed since the
	// commands were queued; a refused one gets NOPERM as its reply.
	user := s.user
	if user != nil && user.allCommands && user.allKeys {
		user = nil
	}
	// Refusals are worked out (and logged) once, not per attempt.
	denied := make([]*aclDenial, len(queued))
	if user != nil {
		for i, q := range queued {
			if denied[i] = user.check(q.cmd, q.args); denied[i] != nil {
				s.logDenial(denied[i], true)
			}
		}
	}
	var keys [][]byte
	barrier := false
	for _, wk := range watched {
		keys = append(keys, wk.key)
	}
	for _, q := range queued {
		switch {
		case q.cmd.flags&flagData != 0:
			keys = append(keys, q.cmd.keys(q.args)...)
		case q.cmd.flags&flagWrite != 0:
			barrier = true // FLUSHALL and the like touch everything
		}
	}
	s.runBatched(keys, barrier, func(ks *keyspace, w *Writer) error {
		for _, wk := range watched {
			m, ok, err := ks.lookup(wk.key)
			if err != nil {
				return err
			}
			if ok != wk.live || m.stamp != wk.stamp {
				w.WriteNullArray()
				return nil
			}
		}
		w.WriteArrayLen(len(queued))
		for i, q := range queued {
			if d := denied[i]; d != nil {
				reason := "no permission to execute the command or subcommand"
				if d.key {
					reason = "no permission to touch the specified keys"
				}
				w.WriteError("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + reason)
				continue
			}
			cx := *q
			cx.w = w
			if cx.cmd.flags&flagData != 0 {
				cx.ks = ks
			}
			before := ks.txn.Len()
			if err := cx.cmd.run(&cx); err != nil {
				if _, ok := asReplyError(err); !ok || ks.txn.Len() != before {
					// Failed after writing: the batcher re-runs this EXEC
					// alone (and then rolls it back).
					return err
				}
				s.writeErr(w, err)
			}
		}
		if ks.wrote {
			// Rewrite each watched key as it is, so that a write to it after
			// this snapshot makes the commit fail (and the batch re-run,
			// which then sees the change and aborts).
			for _, wk := range watched {
				mk := MetaKey(wk.key)
				b, err := ks.txn.Get(ks.ctx, mk)
				switch {
				case err == nil:
					err = ks.txn.Set(mk, bytes.Clone(b))
				case errors.Is(err, kv.ErrNotFound):
					err = ks.txn.Delete(mk)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	return nil
}
