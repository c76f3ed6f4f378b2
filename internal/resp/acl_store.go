package resp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strata-db/strata/internal/kv"
)

// ACL users live in the cluster's system key space beside the SQL
// accounts (package privilege), so every node sees the same users:
//
//	mRedisACLVersion   bumped by every change of users
//	mRedisUser{name}   aclUser as JSON
//
// Each node keeps the users compiled in an aclSnapshot, reloads it when
// it sees the version move and at once after a change it made itself. It
// looks for the version every aclPoll for aclHold after a change it saw or
// made, then less often while nothing changes, down to every aclIdlePoll
// (package pace): a change made on another node takes effect here within
// aclIdlePoll.
var (
	aclVersionKey = []byte("mRedisACLVersion")
	aclUserPrefix = []byte("mRedisUser")
)

// How often a node looks for ACL changes made on another node: every
// aclPoll for aclHold after a change, backing off to aclIdlePoll.
// Variables for tests.
var (
	aclPoll     = 100 * time.Millisecond
	aclIdlePoll = time.Second
	aclHold     = 30 * time.Second
)

type aclSnapshot struct {
	version int64
	users   map[string]*aclCompiled
}

func aclUserKey(name string) []byte {
	return append(append([]byte(nil), aclUserPrefix...), name...)
}

func readACLVersion(ctx context.Context, txn kv.Txn) (int64, error) {
	v, err := txn.Get(ctx, aclVersionKey)
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// readACLUsers reads every stored user visible to txn.
func readACLUsers(ctx context.Context, txn kv.Txn) (map[string]*aclUser, error) {
	end := append(append([]byte(nil), aclUserPrefix...), 0xff)
	entries, err := txn.Scan(ctx, aclUserPrefix, end, 0, false)
	if err != nil {
		return nil, err
	}
	users := map[string]*aclUser{}
	for _, e := range entries {
		if !bytes.HasPrefix(e.Key, aclUserPrefix) {
			continue
		}
		var u aclUser
		if err := json.Unmarshal(e.Value, &u); err != nil {
			return nil, fmt.Errorf("resp: corrupt ACL user entry: %w", err)
		}
		users[u.Name] = &u
	}
	return users, nil
}

// defaultACLUser is the default user when none is stored.
func (s *Server) defaultACLUser() *aclCompiled {
	u := &aclUser{Name: "default", On: true, NoPass: s.cfg.Password == "", Keys: []string{"~*"},
		Channels: []string{"&*"}, Commands: []string{"+@all"}}
	c := compileACLUser(u)
	c.configPassword = s.cfg.Password
	return c
}

func (s *Server) buildACLSnapshot(ver int64, users map[string]*aclUser) *aclSnapshot {
	snap := &aclSnapshot{version: ver, users: map[string]*aclCompiled{}}
	for name, u := range users {
		snap.users[name] = compileACLUser(u)
	}
	if snap.users["default"] == nil {
		snap.users["default"] = s.defaultACLUser()
	}
	return snap
}

// loadACL reads the users and installs them unless a newer version is
// in place; it reports whether it installed them.
func (s *Server) loadACL(ctx context.Context) (bool, error) {
	txn, err := s.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return false, err
	}
	defer txn.Rollback(ctx)
	ver, err := readACLVersion(ctx, txn)
	if err != nil {
		return false, err
	}
	if cur := s.acl.Load(); cur != nil && cur.version >= ver {
		return false, nil
	}
	users, err := readACLUsers(ctx, txn)
	if err != nil {
		return false, err
	}
	s.installACL(s.buildACLSnapshot(ver, users))
	return true, nil
}

func (s *Server) installACL(snap *aclSnapshot) {
	for {
		cur := s.acl.Load()
		if cur != nil && cur.version >= snap.version {
			return
		}
		if s.acl.CompareAndSwap(cur, snap) {
			return
		}
	}
}

// aclLoop reloads the users when another node changed them.
func (s *Server) aclLoop() {
	defer s.wg.Done()
	t := time.NewTimer(s.aclPace.Interval())
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.aclPace.Wake():
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
		changed, err := s.loadACL(ctx)
		if err != nil && !kv.IsRetryable(err) {
			s.cfg.Logger.Debug("resp: reload ACL users", "err", err)
		}
		cancel()
		t.Reset(s.aclPace.Next(changed))
	}
}

// changeACL runs f over the stored users in a transaction: f returns the
// users to write (nil: delete) by name. The version is bumped and the
// new users installed before it returns.
func (s *Server) changeACL(ctx context.Context, f func(cur map[string]*aclUser) (map[string]*aclUser, error)) error {
	err := s.retry(ctx, func() error {
		txn, err := s.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			return err
		}
		defer txn.Rollback(ctx)
		cur, err := readACLUsers(ctx, txn)
		if err != nil {
			return err
		}
		changes, err := f(cur)
		if err != nil || len(changes) == 0 {
			return err
		}
		for name, u := range changes {
			if u == nil {
				err = txn.Delete(aclUserKey(name))
			} else {
				var b []byte
				if b, err = json.Marshal(u); err == nil {
					err = txn.Set(aclUserKey(name), b)
				}
			}
			if err != nil {
				return err
			}
		}
		ver, err := readACLVersion(ctx, txn)
		if err != nil {
			return err
		}
		if err := txn.Set(aclVersionKey, []byte(strconv.FormatInt(ver+1, 10))); err != nil {
			return err
		}
		return txn.Commit(ctx)
	})
	if err != nil {
		return err
	}
	s.aclPace.Touch() // other nodes' changes may follow this one
	_, err = s.loadACL(ctx)
	return err
}
