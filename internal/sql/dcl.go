package sql

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/auth"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Account management statements: CREATE / ALTER / DROP / RENAME USER, SET
// PASSWORD, CREATE / DROP ROLE, GRANT, REVOKE, SET ROLE, SET DEFAULT ROLE,
// and SHOW GRANTS. Each change is one transaction over the stored accounts
// (Engine.changePrivileges); like DDL, the statement first commits the
// session's open transaction.

// runDCL runs an account statement; handled is false for any other.
func (s *Session) runDCL(ctx context.Context, st ast.StmtNode) (res *Result, handled bool, err error) {
	switch st.(type) {
	case *ast.CreateUserStmt, *ast.AlterUserStmt, *ast.DropUserStmt, *ast.RenameUserStmt, *ast.SetPwdStmt,
		*ast.GrantStmt, *ast.RevokeStmt, *ast.GrantRoleStmt, *ast.RevokeRoleStmt, *ast.SetDefaultRoleStmt:
	case *ast.SetRoleStmt:
		return &Result{}, true, s.setRole(st.(*ast.SetRoleStmt))
	default:
		return nil, false, nil
	}
	if s.txn != nil {
		if err := s.finish(ctx, true); err != nil {
			return nil, true, err
		}
	}
	switch n := st.(type) {
	case *ast.CreateUserStmt:
		err = s.createUser(ctx, n)
	case *ast.AlterUserStmt:
		err = s.alterUser(ctx, n)
	case *ast.DropUserStmt:
		err = s.dropUser(ctx, n)
	case *ast.RenameUserStmt:
		err = s.renameUser(ctx, n)
	case *ast.SetPwdStmt:
		err = s.setPassword(ctx, n)
	case *ast.GrantStmt:
		err = s.grant(ctx, n)
	case *ast.RevokeStmt:
		err = s.revoke(ctx, n)
	case *ast.GrantRoleStmt:
		err = s.grantRole(ctx, n.Roles, n.Users, true)
	case *ast.RevokeRoleStmt:
		err = s.grantRole(ctx, n.Roles, n.Users, false)
	case *ast.SetDefaultRoleStmt:
		err = s.setDefaultRole(ctx, n)
	}
	if err != nil {
		return nil, true, err
	}
	return &Result{}, true, nil
}

func ident(u *auth.UserIdentity) privilege.Identity {
	return privilege.Identity{User: u.Username, Host: privilege.NormalHost(u.Hostname)}
}

func roleIdent(r *auth.RoleIdentity) privilege.Identity {
	return privilege.Identity{User: r.Username, Host: privilege.NormalHost(r.Hostname)}
}

// target resolves a user of a statement: CURRENT_USER() is the session's.
func (s *Session) target(u *auth.UserIdentity) privilege.Identity {
	if u == nil || u.CurrentUser {
		return s.auth.account
	}
	return ident(u)
}

// checkIdentLength refuses names longer than MySQL 8 allows (1470): 32
// characters of user, 255 of host.
func checkIdentLength(id privilege.Identity) error {
	if utf8.RuneCountInString(id.User) > 32 {
		return sqlerr.New(1470, "HY000", "String '%s' is too long for user name (should be no longer than 32)", id.User)
	}
	if len(id.Host) > 255 {
		return sqlerr.New(1470, "HY000", "String '%s' is too long for host name (should be no longer than 255)", id.Host)
	}
	return nil
}

func opFailed(op string, ids []privilege.Identity) error {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	return sqlerr.New(1396, "HY000", "Operation %s failed for %s", op, strings.Join(names, ","))
}

// authFrom applies IDENTIFIED ... to a.
func authFrom(a *privilege.Account, opt *ast.AuthOption) error {
	if opt == nil {
		return nil
	}
	plugin := strings.ToLower(opt.AuthPlugin)
	if plugin == "" {
		plugin = a.Plugin
	}
	if plugin == "" {
		plugin = privilege.PluginSHA2
	}
	if plugin != privilege.PluginSHA2 && plugin != privilege.PluginNative {
		return sqlerr.New(1524, "HY000", "Plugin '%s' is not loaded", opt.AuthPlugin)
	}
	a.Plugin = plugin
	switch {
	case opt.ByAuthString:
		h, err := privilege.Hash(plugin, opt.AuthString)
		if err != nil {
			return err
		}
		a.Auth = h
	case opt.ByHashString:
		if err := privilege.CheckHash(plugin, opt.HashString); err != nil {
			return sqlerr.New(1827, "HY000", "%s", err.Error())
		}
		a.Auth = opt.HashString
	default:
		a.Auth = ""
	}
	return nil
}

// accountOptions applies REQUIRE and the password/lock options to a.
func accountOptions(a *privilege.Account, tls []*ast.AuthTokenOrTLSOption, opts []*ast.PasswordOrLockOption) error {
	for _, t := range tls {
		switch t.Type {
		case ast.TlsNone:
			a.RequireSSL, a.RequireX509 = false, false
		case ast.Ssl:
			a.RequireSSL = true
		case ast.X509:
			a.RequireSSL, a.RequireX509 = true, true
		default:
			return notSupported("REQUIRE CIPHER / ISSUER / SUBJECT")
		}
	}
	for _, o := range opts {
		switch o.Type {
		case ast.Lock:
			a.Locked = true
		case ast.Unlock:
			a.Locked = false
			a.Unlocks++
		case ast.FailedLoginAttempts:
			a.FailedLoginAttempts = o.Count
		case ast.PasswordLockTime:
			a.PasswordLockDays = o.Count
		case ast.PasswordLockTimeUnbounded:
			a.PasswordLockDays = -1
		}
	}
	return nil
}

func (s *Session) createUser(ctx context.Context, n *ast.CreateUserStmt) error {
	if n.IsCreateRole {
		if err := s.requireGlobal(privilege.CreateUser|privilege.CreateRole, "CREATE USER or CREATE ROLE"); err != nil {
			return err
		}
	} else if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
		return err
	}
	op := "CREATE USER"
	if n.IsCreateRole {
		op = "CREATE ROLE"
	}
	var accts []*privilege.Account
	for _, spec := range n.Specs {
		a := &privilege.Account{Identity: ident(spec.User), Plugin: privilege.PluginSHA2}
		if a.User == "" {
			return notSupported("anonymous accounts")
		}
		if err := checkIdentLength(a.Identity); err != nil {
			return err
		}
		if n.IsCreateRole {
			a.Role, a.Locked = true, true
		}
		if err := authFrom(a, spec.AuthOpt); err != nil {
			return err
		}
		if err := accountOptions(a, n.AuthTokenOrTLSOptions, n.PasswordOrLockOptions); err != nil {
			return err
		}
		accts = append(accts, a)
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		var failed []privilege.Identity
		for _, a := range accts {
			if cur.Get(a.Identity) != nil {
				if n.IfNotExists {
					s.warnings = append(s.warnings, sqlerr.New(3163, "HY000", "Authorization ID %s already exists.", a.Identity.String()))
					continue
				}
				failed = append(failed, a.Identity)
				continue
			}
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		if failed != nil {
			return opFailed(op, failed)
		}
		return nil
	})
}

func (s *Session) alterUser(ctx context.Context, n *ast.AlterUserStmt) error {
	specs := n.Specs
	if n.CurrentAuth != nil {
		specs = []*ast.UserSpec{{User: &auth.UserIdentity{CurrentUser: true}, AuthOpt: n.CurrentAuth}}
	}
	for _, spec := range specs {
		if id := s.target(spec.User); id != s.auth.account || n.AuthTokenOrTLSOptions != nil || n.PasswordOrLockOptions != nil {
			if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
				return err
			}
		}
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		var failed []privilege.Identity
		for _, spec := range specs {
			id := s.target(spec.User)
			a := cur.Get(id)
			if a == nil {
				if n.IfExists {
					s.warnings = append(s.warnings, sqlerr.New(3162, "HY000", "Authorization ID %s does not exist.", id.String()))
					continue
				}
				failed = append(failed, id)
				continue
			}
			a = a.Clone()
			if err := authFrom(a, spec.AuthOpt); err != nil {
				return err
			}
			if err := accountOptions(a, n.AuthTokenOrTLSOptions, n.PasswordOrLockOptions); err != nil {
				return err
			}
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		if failed != nil {
			return opFailed("ALTER USER", failed)
		}
		return nil
	})
}

// withoutRefs rewrites every account that names one of ids as a granted
// or default role: drop (to nil) or rename.
func withoutRefs(txn kv.Txn, cur *privilege.Snapshot, rename map[privilege.Identity]*privilege.Identity) error {
	for _, a := range cur.Accounts() {
		if _, gone := rename[a.Identity]; gone {
			continue
		}
		changed := false
		fix := func(list []privilege.Identity) []privilege.Identity {
			out := list[:0:0]
			for _, r := range list {
				if to, ok := rename[r]; ok {
					changed = true
					if to != nil {
						out = append(out, *to)
					}
					continue
				}
				out = append(out, r)
			}
			return out
		}
		c := a.Clone()
		c.Roles, c.DefaultRoles = fix(c.Roles), fix(c.DefaultRoles)
		if changed {
			if err := privilege.Put(txn, c); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Session) dropUser(ctx context.Context, n *ast.DropUserStmt) error {
	if n.IsDropRole {
		if err := s.requireGlobal(privilege.CreateUser|privilege.DropRole, "CREATE USER or DROP ROLE"); err != nil {
			return err
		}
	} else if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
		return err
	}
	op := "DROP USER"
	if n.IsDropRole {
		op = "DROP ROLE"
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		var failed []privilege.Identity
		gone := map[privilege.Identity]*privilege.Identity{}
		for _, u := range n.UserList {
			id := s.target(u)
			if cur.Get(id) == nil {
				if n.IfExists {
					s.warnings = append(s.warnings, sqlerr.New(3162, "HY000", "Authorization ID %s does not exist.", id.String()))
					continue
				}
				failed = append(failed, id)
				continue
			}
			gone[id] = nil
			if err := privilege.Remove(txn, id); err != nil {
				return err
			}
		}
		if failed != nil {
			return opFailed(op, failed)
		}
		return withoutRefs(txn, cur, gone)
	})
}

func (s *Session) renameUser(ctx context.Context, n *ast.RenameUserStmt) error {
	if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
		return err
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		moved := map[privilege.Identity]*privilege.Identity{}
		for _, u2u := range n.UserToUsers {
			from, to := s.target(u2u.OldUser), ident(u2u.NewUser)
			if err := checkIdentLength(to); err != nil {
				return err
			}
			a := cur.Get(from)
			if a == nil || cur.Get(to) != nil {
				return opFailed("RENAME USER", []privilege.Identity{from})
			}
			c := a.Clone()
			c.Identity = to
			if err := privilege.Remove(txn, from); err != nil {
				return err
			}
			if err := privilege.Put(txn, c); err != nil {
				return err
			}
			moved[from] = &to
		}
		return withoutRefs(txn, cur, moved)
	})
}

func (s *Session) setPassword(ctx context.Context, n *ast.SetPwdStmt) error {
	id := s.target(n.User)
	if id != s.auth.account {
		if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
			return err
		}
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		a := cur.Get(id)
		if a == nil {
			return sqlerr.New(1133, "28000", "Can't find any matching row in the user table")
		}
		a = a.Clone()
		if err := authFrom(a, &ast.AuthOption{ByAuthString: true, AuthString: n.Password}); err != nil {
			return err
		}
		return privilege.Put(txn, a)
	})
}

// grantTarget is the level of a GRANT / REVOKE: db "" global, table ""
// the database.
type grantTarget struct {
	db, table string
	allowed   privilege.Priv
}

func (s *Session) grantLevel(l *ast.GrantLevel) (grantTarget, error) {
	switch l.Level {
	case ast.GrantLevelGlobal:
		return grantTarget{allowed: privilege.All | privilege.GrantOpt}, nil
	case ast.GrantLevelDB:
		db := l.DBName
		if db == "" {
			db = s.db
		}
		if db == "" {
			return grantTarget{}, sqlerr.New(sqlerr.ErNoDB, "3D000", "No database selected")
		}
		return grantTarget{db: db, allowed: privilege.DBLevel | privilege.GrantOpt}, nil
	}
	db := l.DBName
	if db == "" {
		db = s.db
	}
	if db == "" {
		return grantTarget{}, sqlerr.New(sqlerr.ErNoDB, "3D000", "No database selected")
	}
	return grantTarget{db: db, table: l.TableName, allowed: privilege.TableLevel | privilege.GrantOpt}, nil
}

// grantPrivs parses the privilege list: the table-or-higher part and
// the per-column part.
func grantPrivs(privs []*ast.PrivElem, t grantTarget) (whole privilege.Priv, cols map[string]privilege.Priv, err error) {
	levelAll := t.allowed &^ privilege.GrantOpt
	for _, pe := range privs {
		p, ok := privilege.FromParser(pe.Priv, levelAll)
		if !ok {
			return 0, nil, notSupported("the " + strings.ToUpper(pe.Name) + " privilege")
		}
		if p&^t.allowed != 0 {
			if t.table == "" && t.db != "" {
				return 0, nil, sqlerr.New(1221, "HY000", "Incorrect usage of DB GRANT and GLOBAL PRIVILEGES")
			}
			return 0, nil, sqlerr.New(1144, "42000", "Illegal GRANT/REVOKE command; please consult the manual to see which privileges can be used")
		}
		if len(pe.Cols) > 0 {
			if t.table == "" || p&^privilege.ColumnLevel != 0 {
				return 0, nil, sqlerr.New(1221, "HY000", "Incorrect usage of COLUMN GRANT and NON-COLUMN PRIVILEGES")
			}
			if cols == nil {
				cols = map[string]privilege.Priv{}
			}
			for _, c := range pe.Cols {
				cols[c.Name.O] |= p
			}
			continue
		}
		whole |= p
	}
	return whole, cols, nil
}

// mayGrant checks that the session may grant p (and the column
// privileges) at t: it must hold GRANT OPTION and the privileges there.
func (s *Session) mayGrant(t grantTarget, p privilege.Priv, cols map[string]privilege.Priv) error {
	set := s.privs()
	if isSuperuser(set) {
		return nil
	}
	for _, c := range cols {
		p |= c
	}
	p |= privilege.GrantOpt
	switch {
	case t.db == "":
		if set.Global&p != p {
			return s.globalDenied()
		}
	case t.table == "":
		if set.DBGrant(t.db)&p != p {
			return s.dbDenied(t.db)
		}
	default:
		if set.Table(t.db, t.table)&p != p {
			return s.commandDenied("GRANT", t.table)
		}
	}
	return nil
}

// checkGrantObject checks that the table and columns of a table-level
// grant exist.
func (s *Session) checkGrantObject(ctx context.Context, t grantTarget, cols map[string]privilege.Priv) error {
	if t.db == "" {
		return nil
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return err
	}
	if t.table == "" {
		return nil
	}
	tbl := schema.Table(t.db, t.table)
	if tbl == nil {
		return noSuchTable(t.db, t.table)
	}
	for c := range cols {
		if tbl.Column(c) == nil {
			return sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in '%s'", c, t.table)
		}
	}
	return nil
}

func (s *Session) grant(ctx context.Context, n *ast.GrantStmt) error {
	t, err := s.grantLevel(n.Level)
	if err != nil {
		return err
	}
	whole, cols, err := grantPrivs(n.Privs, t)
	if err != nil {
		return err
	}
	if n.WithGrant {
		whole |= privilege.GrantOpt
	}
	if err := s.mayGrant(t, whole, cols); err != nil {
		return err
	}
	if err := s.checkGrantObject(ctx, t, cols); err != nil {
		return err
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		for _, spec := range n.Users {
			id := s.target(spec.User)
			a := cur.Get(id)
			if a == nil {
				return sqlerr.New(1410, "42000", "You are not allowed to create a user with GRANT")
			}
			a = a.Clone()
			if whole != 0 {
				a.Grant(t.db, t.table, "", whole)
			} else if len(cols) == 0 && t.db != "" {
				a.Grant(t.db, t.table, "", 0) // GRANT USAGE: nothing
			}
			for c, p := range cols {
				a.Grant(t.db, t.table, c, p)
			}
			if err := accountOptions(a, n.AuthTokenOrTLSOptions, nil); err != nil {
				return err
			}
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Session) revoke(ctx context.Context, n *ast.RevokeStmt) error {
	t, err := s.grantLevel(n.Level)
	if err != nil {
		return err
	}
	whole, cols, err := grantPrivs(n.Privs, t)
	if err != nil {
		return err
	}
	if err := s.mayGrant(t, whole&^privilege.GrantOpt, cols); err != nil {
		return err
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		for _, spec := range n.Users {
			id := s.target(spec.User)
			a := cur.Get(id)
			if a == nil {
				return sqlerr.New(1141, "42000", "There is no such grant defined for user '%s' on host '%s'", id.User, id.Host)
			}
			a = a.Clone()
			had := false
			if whole != 0 {
				had = a.Revoke(t.db, t.table, "", whole) || had
				if t.table != "" && whole&privilege.ColumnLevel != 0 {
					// Revoking a table privilege revokes it on every column too.
					for k := range a.Columns {
						if parts := privilege.SplitKey(k); len(parts) == 3 && strings.EqualFold(parts[0], t.db) && strings.EqualFold(parts[1], t.table) {
							had = a.Revoke(t.db, t.table, parts[2], whole) || had
						}
					}
				}
			}
			for c, p := range cols {
				had = a.Revoke(t.db, t.table, c, p) || had
			}
			if !had {
				if t.table != "" {
					return sqlerr.New(1147, "42000", "There is no such grant defined for user '%s' on host '%s' on table '%s'", id.User, id.Host, t.table)
				}
				return sqlerr.New(1141, "42000", "There is no such grant defined for user '%s' on host '%s'", id.User, id.Host)
			}
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		return nil
	})
}

func unknownAuthID(id privilege.Identity) error {
	return sqlerr.New(3523, "HY000", "Unknown authorization ID %s", id.Quoted())
}

func (s *Session) grantRole(ctx context.Context, roles []*auth.RoleIdentity, users []*auth.UserIdentity, grant bool) error {
	if err := s.requireGlobal(privilege.CreateUser|privilege.Super, "ROLE_ADMIN"); err != nil {
		return err
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		var rids []privilege.Identity
		for _, r := range roles {
			id := roleIdent(r)
			if cur.Get(id) == nil {
				return unknownAuthID(id)
			}
			rids = append(rids, id)
		}
		for _, u := range users {
			id := s.target(u)
			a := cur.Get(id)
			if a == nil {
				return unknownAuthID(id)
			}
			a = a.Clone()
			for _, r := range rids {
				if grant {
					if r == id {
						return sqlerr.New(3716, "HY000", "Roles cannot be granted to themselves")
					}
					if !a.HasRole(r) {
						a.Roles = append(a.Roles, r)
					}
				} else {
					a.Roles = slices.DeleteFunc(a.Roles, func(x privilege.Identity) bool { return x == r })
					a.DefaultRoles = slices.DeleteFunc(a.DefaultRoles, func(x privilege.Identity) bool { return x == r })
				}
			}
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		return nil
	})
}

func notGranted(role, user privilege.Identity) error {
	return sqlerr.New(3530, "HY000", "%s is not granted to %s", role.Quoted(), user.Quoted())
}

// rolesFor resolves a SET ROLE / SET DEFAULT ROLE list for account a.
func rolesFor(a *privilege.Account, opt ast.SetRoleStmtType, list []*auth.RoleIdentity) ([]privilege.Identity, error) {
	switch opt {
	case ast.SetRoleNone:
		return nil, nil
	case ast.SetRoleAll:
		return append([]privilege.Identity(nil), a.Roles...), nil
	case ast.SetRoleDefault:
		return append([]privilege.Identity(nil), a.DefaultRoles...), nil
	case ast.SetRoleAllExcept:
		var out []privilege.Identity
		for _, r := range a.Roles {
			if !slices.ContainsFunc(list, func(x *auth.RoleIdentity) bool { return roleIdent(x) == r }) {
				out = append(out, r)
			}
		}
		return out, nil
	}
	var out []privilege.Identity
	for _, r := range list {
		id := roleIdent(r)
		if !a.HasRole(id) {
			return nil, notGranted(id, a.Identity)
		}
		out = append(out, id)
	}
	return out, nil
}

func (s *Session) setRole(n *ast.SetRoleStmt) error {
	a := s.e.Privileges().Get(s.auth.account)
	if a == nil {
		return unknownAuthID(s.auth.account)
	}
	roles, err := rolesFor(a, n.SetRoleOpt, n.RoleList)
	if err != nil {
		return err
	}
	s.auth.roles, s.auth.set = roles, nil
	return nil
}

func (s *Session) setDefaultRole(ctx context.Context, n *ast.SetDefaultRoleStmt) error {
	for _, u := range n.UserList {
		if s.target(u) != s.auth.account {
			if err := s.requireGlobal(privilege.CreateUser, "CREATE USER"); err != nil {
				return err
			}
		}
	}
	return s.e.changePrivileges(ctx, func(txn kv.Txn, cur *privilege.Snapshot) error {
		for _, u := range n.UserList {
			id := s.target(u)
			a := cur.Get(id)
			if a == nil {
				return unknownAuthID(id)
			}
			roles, err := rolesFor(a, n.SetRoleOpt, n.RoleList)
			if err != nil {
				return err
			}
			a = a.Clone()
			a.DefaultRoles = roles
			if err := privilege.Put(txn, a); err != nil {
				return err
			}
		}
		return nil
	})
}

// commandDenied is 1142 with a command name of its own (SHOW, GRANT).
func (s *Session) commandDenied(cmd, table string) error {
	return sqlerr.New(1142, "42000", "%s command denied to user '%s'@'%s' for table '%s'", cmd, s.user, s.host, table)
}

func quoteName(n string) string { return "`" + strings.ReplaceAll(n, "`", "``") + "`" }

// levelString is a privilege set as SHOW GRANTS lists it at a level whose
// full set is full: ALL PRIVILEGES when it holds all of it.
func levelString(p, full privilege.Priv) string {
	if p&full == full {
		return "ALL PRIVILEGES"
	}
	if p&^privilege.GrantOpt == 0 {
		return "USAGE"
	}
	return p.String()
}

// Grants renders the GRANT statements that recreate a's privileges, as
// SHOW GRANTS lists them.
func Grants(a *privilege.Account) []string {
	to := " TO " + a.Identity.Quoted()
	opt := func(p privilege.Priv) string {
		if p&privilege.GrantOpt != 0 {
			return " WITH GRANT OPTION"
		}
		return ""
	}
	out := []string{"GRANT " + levelString(a.Global, privilege.All) + " ON *.*" + to + opt(a.Global)}
	dbs := make([]string, 0, len(a.DBs))
	for db := range a.DBs {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	for _, db := range dbs {
		p := a.DBs[db]
		out = append(out, "GRANT "+levelString(p, privilege.DBLevel)+" ON "+quoteName(db)+".*"+to+opt(p))
	}
	tables := make([]string, 0, len(a.Tables))
	for k := range a.Tables {
		tables = append(tables, k)
	}
	for k := range a.Columns {
		parts := privilege.SplitKey(k)
		tk := parts[0] + "\x00" + parts[1]
		if _, ok := a.Tables[tk]; !ok && !slices.Contains(tables, tk) {
			tables = append(tables, tk)
		}
	}
	sort.Strings(tables)
	for _, tk := range tables {
		parts := privilege.SplitKey(tk)
		p := a.Tables[tk]
		var items []string
		if p&^privilege.GrantOpt != 0 {
			items = append(items, levelString(p, privilege.TableLevel))
		}
		// Column privileges: per privilege, its columns.
		for _, cp := range []privilege.Priv{privilege.Select, privilege.Insert, privilege.Update, privilege.References} {
			var cols []string
			for k, v := range a.Columns {
				cparts := privilege.SplitKey(k)
				if cparts[0] == parts[0] && cparts[1] == parts[1] && v&cp != 0 {
					cols = append(cols, quoteName(cparts[2]))
				}
			}
			if cols != nil {
				sort.Strings(cols)
				items = append(items, cp.Name()+" ("+strings.Join(cols, ", ")+")")
			}
		}
		if items == nil {
			items = []string{"USAGE"}
		}
		out = append(out, "GRANT "+strings.Join(items, ", ")+" ON "+quoteName(parts[0])+"."+quoteName(parts[1])+to+opt(p))
	}
	if len(a.Roles) > 0 {
		names := make([]string, len(a.Roles))
		for i, r := range a.Roles {
			names[i] = r.Quoted()
		}
		out = append(out, "GRANT "+strings.Join(names, ",")+to)
	}
	return out
}

func (s *Session) showGrants(n *ast.ShowStmt) (*Result, error) {
	id := s.auth.account
	if n.User != nil && !n.User.CurrentUser {
		id = ident(n.User)
		if id != s.auth.account {
			if err := s.requireGlobal(privilege.CreateUser|privilege.Super, "SELECT on mysql.*, CREATE USER"); err != nil {
				return nil, sqlerr.New(1044, "42000", "Access denied for user '%s'@'%s' to database 'mysql'", s.user, s.host)
			}
		}
	}
	a := s.e.Privileges().Get(id)
	if a == nil {
		return nil, sqlerr.New(1141, "42000", "There is no such grant defined for user '%s' on host '%s'", id.User, id.Host)
	}
	res := &Result{Columns: textColumns(fmt.Sprintf("Grants for %s@%s", id.User, id.Host))}
	for _, g := range Grants(a) {
		res.Rows = append(res.Rows, textRow(g))
	}
	return res, nil
}

// visibleProcesses is the process list the session may see: every
// session's with PROCESS, its own user's otherwise.
func (s *Session) visibleProcesses() []Process {
	all := s.e.Processes()
	set := s.privs()
	if isSuperuser(set) || set.Global&privilege.Process != 0 {
		return all
	}
	out := all[:0:0]
	for _, p := range all {
		if p.User == s.user {
			out = append(out, p)
		}
	}
	return out
}

// privilegeRows are the rows of INFORMATION_SCHEMA's USER_PRIVILEGES,
// SCHEMA_PRIVILEGES, TABLE_PRIVILEGES and COLUMN_PRIVILEGES: every
// account's for a session that may manage accounts, its own otherwise.
func (s *Session) privilegeRows(table string) [][]types.Datum {
	snap := s.e.Privileges()
	set := s.privs()
	all := isSuperuser(set) || set.Global&privilege.CreateUser != 0
	var rows [][]types.Datum
	add := func(vals ...string) { rows = append(rows, textRow(vals...)) }
	grantable := func(p privilege.Priv) string {
		if p&privilege.GrantOpt != 0 {
			return "YES"
		}
		return "NO"
	}
	for _, a := range snap.Accounts() {
		if !all && a.Identity != s.auth.account {
			continue
		}
		grantee := a.Identity.String()
		switch strings.ToUpper(table) {
		case "USER_PRIVILEGES":
			names := a.Global.Names()
			if len(names) == 0 {
				names = []string{"USAGE"}
			}
			for _, p := range names {
				add(grantee, "def", p, grantable(a.Global))
			}
		case "SCHEMA_PRIVILEGES":
			for db, p := range a.DBs {
				for _, name := range p.Names() {
					add(grantee, "def", db, name, grantable(p))
				}
			}
		case "TABLE_PRIVILEGES":
			for k, p := range a.Tables {
				parts := privilege.SplitKey(k)
				for _, name := range p.Names() {
					add(grantee, "def", parts[0], parts[1], name, grantable(p))
				}
			}
		case "COLUMN_PRIVILEGES":
			for k, p := range a.Columns {
				parts := privilege.SplitKey(k)
				for _, name := range p.Names() {
					add(grantee, "def", parts[0], parts[1], parts[2], name, grantable(a.Tables[parts[0]+"\x00"+parts[1]]))
				}
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		for c := range rows[i] {
			x, _ := rows[i][c].ToString()
			y, _ := rows[j][c].ToString()
			if x != y {
				return x < y
			}
		}
		return false
	})
	return rows
}
