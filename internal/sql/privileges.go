package sql

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/privilege"
)

// The engine's part in accounts and privileges (package privilege): it
// caches the cluster's accounts as a privilege.Snapshot, reloads it when
// the privilege version moves (Tick), and runs the changes DCL statements
// make (dcl.go) as transactions that bump that version.

// Privileges returns the accounts as this engine last loaded them.
func (e *Engine) Privileges() *privilege.Snapshot { return e.privs.Load() }

// loadPrivileges reads the accounts and installs them; a cluster without
// any gets its root account (privilege.Root) first.
func (e *Engine) loadPrivileges(ctx context.Context) error {
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	snap, err := privilege.Load(ctx, txn)
	txn.Rollback(ctx)
	if err != nil {
		return err
	}
	if len(snap.Accounts()) == 0 {
		return e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
			if len(cur.Accounts()) > 0 {
				return nil // another node bootstrapped it meanwhile
			}
			return privilege.Put(txn, privilege.Root())
		})
	}
	e.installPrivileges(snap)
	return nil
}

// installPrivileges makes snap the engine's unless a newer one is in place.
func (e *Engine) installPrivileges(snap *privilege.Snapshot) {
	for {
		cur := e.privs.Load()
		if cur != nil && cur.Version >= snap.Version {
			return
		}
		if e.privs.CompareAndSwap(cur, snap) {
			return
		}
	}
}

// refreshPrivileges reloads the accounts when the stored version is newer
// than the cached one; Tick calls it with the version it read.
func (e *Engine) refreshPrivileges(ctx context.Context, txn kv.Txn) error {
	ver, err := privilege.Version(ctx, txn)
	if err != nil {
		return err
	}
	if cur := e.privs.Load(); cur != nil && ver <= cur.Version {
		return nil
	}
	snap, err := privilege.Load(ctx, txn)
	if err != nil {
		return err
	}
	e.installPrivileges(snap)
	return nil
}

// changePrivileges runs f in a transaction over the latest accounts, bumps
// the privilege version and commits, retrying on conflicts; the engine
// then installs the new accounts before it returns, so the session's next
// statement sees them. f must only read cur and write through txn.
func (e *Engine) changePrivileges(ctx context.Context, f func(txn kv.Txn, cur *privilege.Snapshot) error) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var txn kv.Txn
		if txn, err = e.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return err
		}
		var cur *privilege.Snapshot
		if cur, err = privilege.Load(ctx, txn); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if err = f(txn, cur); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if _, err = privilege.BumpVersion(ctx, txn); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if err = txn.Commit(ctx); err == nil {
			break
		}
		if !kv.IsRetryable(err) {
			return err
		}
	}
	if err != nil {
		return err
	}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	defer txn.Rollback(ctx)
	snap, err := privilege.Load(ctx, txn)
	if err != nil {
		return err
	}
	e.installPrivileges(snap)
	return nil
}

// SetRootPassword makes password root@'%”s password unless it already
// is (strata start --root-password). An empty password changes nothing.
func (e *Engine) SetRootPassword(ctx context.Context, password string) error {
	if password == "" {
		return nil
	}
	root := privilege.Identity{User: "root", Host: "%"}
	if a := e.Privileges().Get(root); a != nil && a.Auth != "" && privilege.VerifyPassword(a, password) {
		return nil
	}
	h, err := privilege.Hash(privilege.PluginSHA2, password)
	if err != nil {
		return err
	}
	return e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		a := cur.Get(root)
		if a == nil {
			return fmt.Errorf("sql: the root account does not exist")
		}
		a = a.Clone()
		a.Plugin, a.Auth = privilege.PluginSHA2, h
		return privilege.Put(txn, a)
	})
}
