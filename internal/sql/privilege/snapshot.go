package privilege

import (
	"sort"
	"strings"
)

// Snapshot is every account of the cluster at one privilege version.
type Snapshot struct {
	Version int64
	list    []*Account // in match order
	byID    map[Identity]*Account
}

// NewSnapshot builds a snapshot of accounts (which it keeps; they must
// not be modified afterwards).
func NewSnapshot(version int64, accounts []*Account) *Snapshot {
	s := &Snapshot{Version: version, list: append([]*Account(nil), accounts...), byID: map[Identity]*Account{}}
	sort.SliceStable(s.list, func(i, j int) bool {
		a, b := s.list[i], s.list[j]
		if sa, sb := specificity(a.Host), specificity(b.Host); sa != sb {
			return sa > sb
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.User < b.User
	})
	for _, a := range s.list {
		s.byID[a.Identity] = a
	}
	return s
}

// Accounts returns every account in match order (read only).
func (s *Snapshot) Accounts() []*Account { return s.list }

// Get returns the account id names exactly, or nil.
func (s *Snapshot) Get(id Identity) *Account {
	return s.byID[Identity{User: id.User, Host: NormalHost(id.Host)}]
}

// Match returns the account a login of user from ip uses (loopback: the
// client is on a loopback address or a Unix socket), or nil. Roles are
// accounts too, but locked, so a login as one fails later.
func (s *Snapshot) Match(user, ip string, loopback bool) *Account {
	for _, a := range s.list {
		if a.User == user && hostMatches(a.Host, ip, loopback) {
			return a
		}
	}
	return nil
}

// Effective returns the privileges of account a with the given roles
// active: its own and the active roles', with the roles granted to those
// roles in turn. Roles no longer granted to a are ignored.
func (s *Snapshot) Effective(a *Account, active []Identity) *Set {
	set := &Set{DBs: map[string]Priv{}, Tables: map[string]Priv{}, Columns: map[string]Priv{}, colTables: map[string]Priv{}}
	if a == nil {
		return set
	}
	seen := map[Identity]bool{}
	var add func(x *Account)
	add = func(x *Account) {
		if x == nil || seen[x.Identity] {
			return
		}
		seen[x.Identity] = true
		set.Global |= x.Global
		for k, v := range x.DBs {
			set.DBs[k] |= v
		}
		for k, v := range x.Tables {
			set.Tables[k] |= v
		}
		for k, v := range x.Columns {
			set.Columns[k] |= v
			t := k[:strings.LastIndexByte(k, 0)]
			set.colTables[t] |= v
		}
		if x != a {
			for _, r := range x.Roles {
				add(s.byID[r])
			}
		}
	}
	add(a)
	for _, r := range active {
		if a.HasRole(r) {
			add(s.byID[r])
		}
	}
	set.sortPatterns()
	return set
}
