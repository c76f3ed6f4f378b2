package privilege

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

// Keys, in the catalog's "m" space of the transactional key space:
//
//	mPrivVersion            bumped by every change of accounts
//	mUser{user}\x00{host}   Account as JSON
var (
	keyVersion = []byte("mPrivVersion")
	prefixUser = []byte("mUser")
)

func accountKey(id Identity) []byte {
	k := append([]byte(nil), prefixUser...)
	k = append(k, id.User...)
	k = append(k, 0)
	return append(k, NormalHost(id.Host)...)
}

// VersionKey is the key of the privilege version counter.
func VersionKey() []byte { return keyVersion }

// Version reads the privilege version visible to txn (0: never changed).
func Version(ctx context.Context, txn kv.Txn) (int64, error) {
	return tablecodec.ReadCounter(ctx, txn, keyVersion)
}

// Load reads every account visible to txn.
func Load(ctx context.Context, txn kv.Txn) (*Snapshot, error) {
	ver, err := Version(ctx, txn)
	if err != nil {
		return nil, err
	}
	end := append(append([]byte(nil), prefixUser...), 0xff)
	entries, err := txn.Scan(ctx, prefixUser, end, 0, false)
	if err != nil {
		return nil, err
	}
	var accts []*Account
	for _, e := range entries {
		if !bytes.HasPrefix(e.Key, prefixUser) {
			continue
		}
		var a Account
		if err := json.Unmarshal(e.Value, &a); err != nil {
			return nil, fmt.Errorf("privilege: corrupt account entry: %w", err)
		}
		accts = append(accts, &a)
	}
	return NewSnapshot(ver, accts), nil
}

// Put stores a in txn (replacing the account of the same identity).
func Put(txn kv.Txn, a *Account) error {
	a.Host = NormalHost(a.Host)
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return txn.Set(accountKey(a.Identity), v)
}

// Remove deletes the account id in txn.
func Remove(txn kv.Txn, id Identity) error { return txn.Delete(accountKey(id)) }

// BumpVersion increments the privilege version in txn and returns it.
func BumpVersion(ctx context.Context, txn kv.Txn) (int64, error) {
	v, err := Version(ctx, txn)
	if err != nil {
		return 0, err
	}
	v++
	return v, txn.Set(keyVersion, []byte(strconv.FormatInt(v, 10)))
}

// Root is the account a new cluster starts with: every privilege, from
// any host, no password (which the server accepts only from loopback).
func Root() *Account {
	return &Account{Identity: Identity{User: "root", Host: "%"}, Plugin: PluginSHA2, Global: All | GrantOpt}
}
