package sql

import (
	"context"
	"net"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Privilege checks. Every statement is checked against the session's
// effective privileges (privilege.Set: its account's and its active
// roles'), which the session rebuilds only when the engine's privilege
// snapshot changes. A DML statement's needs are worked out from its syntax
// tree when it is planned and kept with the plan (compiled.needs); a plan
// that passed for a Set is not checked again for the same Set, so a
// cached point select costs one atomic load and a pointer comparison.

// sessionAuth is who the session is, for privileges.
type sessionAuth struct {
	account      privilege.Identity // CURRENT_USER(): the account the login matched
	roles        []privilege.Identity
	usedPassword bool
	set          *privilege.Set
	setVer       int64
	tlsVersion   string
	tlsCipher    string
}

// initAuth matches the session's user and host to an account and
// activates its default roles.
func (s *Session) initAuth() {
	snap := s.e.privs.Load()
	if snap == nil {
		return
	}
	loopback := s.host == "localhost"
	if ip := net.ParseIP(s.host); ip != nil {
		loopback = ip.IsLoopback()
	}
	if a := snap.Match(s.user, s.host, loopback); a != nil {
		s.auth.account = a.Identity
		s.auth.roles = append([]privilege.Identity(nil), a.DefaultRoles...)
	} else {
		s.auth.account = privilege.Identity{User: s.user, Host: s.host}
	}
}

// SetConnInfo records what the connection's authentication established:
// whether a password was used and the TLS version and cipher (empty for a
// plaintext connection), for error messages and SHOW STATUS.
func (s *Session) SetConnInfo(usedPassword bool, tlsVersion, tlsCipher string) {
	s.auth.usedPassword, s.auth.tlsVersion, s.auth.tlsCipher = usedPassword, tlsVersion, tlsCipher
}

// CurrentAccount is CURRENT_USER().
func (s *Session) CurrentAccount() privilege.Identity { return s.auth.account }

// privs returns the session's effective privileges.
func (s *Session) privs() *privilege.Set {
	snap := s.e.privs.Load()
	if snap == nil {
		return allPrivs
	}
	if s.auth.set != nil && s.auth.setVer == snap.Version {
		return s.auth.set
	}
	s.auth.set = snap.Effective(snap.Get(s.auth.account), s.auth.roles)
	s.auth.setVer = snap.Version
	return s.auth.set
}

var allPrivs = &privilege.Set{Global: privilege.All | privilege.GrantOpt}

func isSuperuser(set *privilege.Set) bool { return set.Global == privilege.All|privilege.GrantOpt }

// The errors of a failed check, as MySQL words them.

func (s *Session) tableDenied(p privilege.Priv, table string) error {
	return sqlerr.New(1142, "42000", "%s command denied to user '%s'@'%s' for table '%s'", p.Name(), s.user, s.host, table)
}

func (s *Session) columnDenied(p privilege.Priv, col, table string) error {
	return sqlerr.New(1143, "42000", "%s command denied to user '%s'@'%s' for column '%s' in table '%s'", p.Name(), s.user, s.host, col, table)
}

func (s *Session) dbDenied(db string) error {
	return sqlerr.New(1044, "42000", "Access denied for user '%s'@'%s' to database '%s'", s.user, s.host, db)
}

func (s *Session) globalDenied() error {
	using := "NO"
	if s.auth.usedPassword {
		using = "YES"
	}
	return sqlerr.New(sqlerr.ErAccessDenied, "28000", "Access denied for user '%s'@'%s' (using password: %s)", s.user, s.host, using)
}

func needPrivilege(names string) error {
	return sqlerr.New(1227, "42000", "Access denied; you need (at least one of) the %s privilege(s) for this operation", names)
}

// requireGlobal fails with 1227 unless the session holds one of p globally.
func (s *Session) requireGlobal(p privilege.Priv, names string) error {
	if s.privs().Global&p != 0 {
		return nil
	}
	return needPrivilege(names)
}

// need is one privilege a statement needs on a table; cols lists the
// columns the statement touches there (nil: none named, "*": all), for
// the column-level check when the table-level one fails.
type need struct {
	db, table string
	priv      privilege.Priv
	cols      []string
	// global: priv is needed globally (INFORMATION_SCHEMA's cluster
	// tables need PROCESS, as in TiDB: region bounds are row keys).
	global bool
}

// checkNeeds checks needs against the session's privileges.
func (s *Session) checkNeeds(needs []need) error {
	set := s.privs()
	if isSuperuser(set) {
		return nil
	}
	for _, n := range needs {
		if n.global {
			if set.Global&n.priv == 0 {
				return needPrivilege(n.priv.Name())
			}
			continue
		}
		if n.table == "" {
			if set.DB(n.db)&n.priv != n.priv {
				return s.dbDenied(n.db)
			}
			continue
		}
		have := set.Table(n.db, n.table)
		if have&n.priv == n.priv {
			continue
		}
		missing := n.priv &^ have
		if missing&^privilege.ColumnLevel != 0 || set.AnyColumn(n.db, n.table)&missing == 0 {
			return s.tableDenied(missing, n.table)
		}
		cols := n.cols
		if len(cols) == 1 && cols[0] == "*" {
			cols = s.allColumns(n.db, n.table)
		}
		for _, c := range cols {
			if set.Column(n.db, n.table, c)&missing != missing {
				return s.columnDenied(missing, c, n.table)
			}
		}
	}
	return nil
}

// allColumns lists a table's columns from the latest schema.
func (s *Session) allColumns(db, table string) []string {
	schema := s.e.schema.Load()
	if schema == nil {
		return nil
	}
	t := schema.Table(db, table)
	if t == nil {
		return nil
	}
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// checkCompiled checks a planned DML statement, once per privilege Set.
func (s *Session) checkCompiled(c *compiled) error {
	set := s.privs()
	if c.privOK == set {
		return nil
	}
	if err := s.checkNeeds(c.needs); err != nil {
		return err
	}
	c.privOK = set
	return nil
}

// refs collects the tables and columns a statement names.
type refs struct {
	db      string
	tables  []*ast.TableName
	aliases map[*ast.TableName]string
	cols    []*ast.ColumnName
	wild    []*ast.WildCardField
	ctes    map[string]bool
}

func (r *refs) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.WithClause:
		for _, c := range x.CTEs {
			r.ctes[c.Name.L] = true
		}
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok && x.AsName.L != "" {
			r.aliases[tn] = x.AsName.L
		}
	case *ast.TableName:
		r.tables = append(r.tables, x)
	case *ast.ColumnName:
		r.cols = append(r.cols, x)
	case *ast.SelectField:
		if x.WildCard != nil {
			r.wild = append(r.wild, x.WildCard)
		}
	}
	return n, false
}

func (r *refs) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func collectRefs(node ast.Node, db string) *refs {
	r := &refs{db: db, aliases: map[*ast.TableName]string{}, ctes: map[string]bool{}}
	if node != nil {
		node.Accept(r)
	}
	return r
}

// dbOf is the database a table name refers to.
func (r *refs) dbOf(tn *ast.TableName) string {
	if tn.Schema.O != "" {
		return tn.Schema.O
	}
	return r.db
}

// real reports whether tn names a stored table or view (not a CTE, not
// INFORMATION_SCHEMA, which everyone may read).
func (r *refs) real(tn *ast.TableName) bool {
	if tn.Schema.O == "" && r.ctes[tn.Name.L] {
		return false
	}
	db := r.dbOf(tn)
	return db != "" && !infoschema.IsName(db)
}

// colsOf lists the columns the statement names that may belong to tn.
func (r *refs) colsOf(tn *ast.TableName) []string {
	alias := r.aliases[tn]
	for _, w := range r.wild {
		if w.Table.L == "" || w.Table.L == tn.Name.L || w.Table.L == alias {
			return []string{"*"}
		}
	}
	var out []string
	for _, c := range r.cols {
		if c.Table.L == "" || c.Table.L == tn.Name.L || c.Table.L == alias {
			out = append(out, c.Name.O)
		}
	}
	return out
}

// reads adds a Select need for every real table of r not in skip.
func (r *refs) reads(needs []need, skip map[*ast.TableName]bool) []need {
	for _, tn := range r.tables {
		if !skip[tn] && infoschema.IsName(r.dbOf(tn)) && infoschema.IsClusterTable(tn.Name.O) && !(tn.Schema.O == "" && r.ctes[tn.Name.L]) {
			needs = append(needs, need{priv: privilege.Process, global: true})
		}
		if skip[tn] || !r.real(tn) {
			continue
		}
		needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Select, cols: r.colsOf(tn)})
	}
	return needs
}

// dmlNeeds works out what a SELECT, INSERT, UPDATE or DELETE needs.
func (s *Session) dmlNeeds(st ast.StmtNode) []need {
	r := collectRefs(st, s.db)
	var needs []need
	switch n := st.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		return r.reads(nil, nil)
	case *ast.InsertStmt:
		tn := firstTable(n.Table)
		if tn == nil {
			return r.reads(nil, nil)
		}
		p := privilege.Insert
		if n.IsReplace {
			p |= privilege.Delete
		}
		var cols []string
		for _, c := range n.Columns {
			cols = append(cols, c.Name.O)
		}
		if len(cols) == 0 {
			cols = []string{"*"}
		}
		needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: p, cols: cols})
		if len(n.OnDuplicate) > 0 {
			var up []string
			for _, a := range n.OnDuplicate {
				up = append(up, a.Column.Name.O)
			}
			needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Update, cols: up})
		}
		sub := collectRefs(n.Select, s.db)
		for k := range r.ctes {
			sub.ctes[k] = true
		}
		return sub.reads(needs, nil)
	case *ast.UpdateStmt:
		targets := map[*ast.TableName]bool{}
		single := len(r.tables) == 1 || n.MultipleTable == false
		for _, tn := range r.tables {
			var cols []string
			for _, a := range n.List {
				q := a.Column.Table.L
				if single && q == "" || q == tn.Name.L || q == r.aliases[tn] {
					cols = append(cols, a.Column.Name.O)
				}
			}
			if cols != nil && r.real(tn) {
				targets[tn] = true
				needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Update, cols: cols})
				if n.Where != nil {
					needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Select, cols: whereCols(n.Where)})
				}
			}
			if single {
				break
			}
		}
		return r.reads(needs, targets)
	case *ast.DeleteStmt:
		targets := map[*ast.TableName]bool{}
		if n.IsMultiTable && n.Tables != nil {
			for _, t := range n.Tables.Tables {
				for _, tn := range r.tables {
					if targets[tn] || tn == t {
						continue
					}
					if tn.Name.L == t.Name.L || r.aliases[tn] == t.Name.L {
						targets[tn] = true
						needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Delete})
					}
				}
				// The target list names tables (or aliases) again.
				targets[t] = true
			}
		} else if tn := firstTable(n.TableRefs); tn != nil {
			targets[tn] = true
			needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Delete})
			if n.Where != nil {
				needs = append(needs, need{db: r.dbOf(tn), table: tn.Name.O, priv: privilege.Select, cols: whereCols(n.Where)})
			}
		}
		return r.reads(needs, targets)
	}
	return nil
}

func whereCols(e ast.ExprNode) []string {
	r := collectRefs(e, "")
	var out []string
	for _, c := range r.cols {
		out = append(out, c.Name.O)
	}
	return out
}

// firstTable is the first table of a FROM / INTO clause.
func firstTable(refs *ast.TableRefsClause) *ast.TableName {
	if refs == nil || refs.TableRefs == nil {
		return nil
	}
	var node ast.ResultSetNode = refs.TableRefs
	for node != nil {
		switch x := node.(type) {
		case *ast.Join:
			node = x.Left
		case *ast.TableSource:
			tn, _ := x.Source.(*ast.TableName)
			return tn
		case *ast.TableName:
			return x
		default:
			return nil
		}
	}
	return nil
}

// deniedFirst is the error of a DML statement that failed to plan with
// err: the privilege error if the session may not run it anyway, as MySQL
// checks privileges before it looks for tables and columns, so that a
// user cannot probe which tables exist where it holds nothing.
func (s *Session) deniedFirst(st ast.StmtNode, err error) error {
	needs := s.dmlNeeds(st)
	for _, n := range needs {
		if n.db == "" && n.table != "" {
			return err // no database selected
		}
	}
	if perr := s.checkNeeds(needs); perr != nil {
		return perr
	}
	return err
}

// tableNeed is the need of p on a named table.
func (s *Session) tableNeed(tn *ast.TableName, p privilege.Priv) need {
	db := tn.Schema.O
	if db == "" {
		db = s.db
	}
	return need{db: db, table: tn.Name.O, priv: p}
}

// checkStmt checks the statements that are not planned DML: DDL, SET
// GLOBAL, ADMIN, LOAD DATA and the like. SHOW, USE, KILL and the account
// statements check inside their own code.
func (s *Session) checkStmt(ctx context.Context, st ast.StmtNode) error {
	set := s.privs()
	if isSuperuser(set) {
		return nil
	}
	var needs []need
	switch n := st.(type) {
	case *ast.CreateDatabaseStmt:
		needs = append(needs, need{db: n.Name.O, priv: privilege.Create})
	case *ast.DropDatabaseStmt:
		needs = append(needs, need{db: n.Name.O, priv: privilege.Drop})
	case *ast.CreateTableStmt:
		if n.TemporaryKeyword != ast.TemporaryNone {
			needs = append(needs, s.tableNeed(n.Table, privilege.CreateTmpTable))
			if set.Table(s.tableNeed(n.Table, 0).db, "")&privilege.CreateTmpTable != 0 {
				needs = needs[:0]
			}
		} else {
			needs = append(needs, s.tableNeed(n.Table, privilege.Create))
		}
		if n.ReferTable != nil {
			needs = append(needs, s.tableNeed(n.ReferTable, privilege.Select))
		}
		if n.Select != nil {
			needs = collectRefs(n.Select, s.db).reads(needs, nil)
		}
	case *ast.DropTableStmt:
		for _, t := range n.Tables {
			if n.TemporaryKeyword != ast.TemporaryNone {
				continue
			}
			needs = append(needs, s.tableNeed(t, privilege.Drop))
		}
	case *ast.AlterTableStmt:
		needs = append(needs, s.tableNeed(n.Table, privilege.Alter))
		for _, spec := range n.Specs {
			if spec.Tp == ast.AlterTableRenameTable && spec.NewTable != nil {
				needs = append(needs, s.tableNeed(n.Table, privilege.Drop),
					s.tableNeed(spec.NewTable, privilege.Create|privilege.Insert))
			}
		}
	case *ast.CreateIndexStmt:
		needs = append(needs, s.tableNeed(n.Table, privilege.Index))
	case *ast.DropIndexStmt:
		needs = append(needs, s.tableNeed(n.Table, privilege.Index))
	case *ast.TruncateTableStmt:
		needs = append(needs, s.tableNeed(n.Table, privilege.Drop))
	case *ast.AnalyzeTableStmt:
		for _, t := range n.TableNames {
			needs = append(needs, s.tableNeed(t, privilege.Select|privilege.Insert))
		}
	case *ast.CreateViewStmt:
		p := privilege.CreateView
		if n.OrReplace {
			p |= privilege.Drop
		}
		needs = append(needs, s.tableNeed(n.ViewName, p))
		needs = collectRefs(n.Select, s.db).reads(needs, nil)
	case *ast.RenameTableStmt:
		for _, t2t := range n.TableToTables {
			needs = append(needs, s.tableNeed(t2t.OldTable, privilege.Alter|privilege.Drop),
				s.tableNeed(t2t.NewTable, privilege.Create|privilege.Insert))
		}
	case *ast.LoadDataStmt:
		needs = append(needs, s.tableNeed(n.Table, privilege.Insert))
	case *ast.LockTablesStmt:
		for _, tl := range n.TableLocks {
			needs = append(needs, s.tableNeed(tl.Table, privilege.Select))
		}
	case *ast.SetStmt:
		for _, v := range n.Variables {
			if v.IsGlobal {
				return s.requireGlobal(privilege.Super, "SUPER or SYSTEM_VARIABLES_ADMIN")
			}
		}
	case *ast.AdminStmt, *ast.SplitRegionStmt:
		return s.requireGlobal(privilege.Super, "SUPER")
	case *ast.FlushStmt:
		return s.requireGlobal(privilege.Reload, "RELOAD")
	}
	for i := range needs {
		if needs[i].db == "" && needs[i].table != "" {
			return nil // the statement fails with 1046 (no database selected)
		}
	}
	return s.checkNeeds(needs)
}

// canSeeDB reports whether SHOW DATABASES lists db for the session.
func (s *Session) canSeeDB(db string) bool {
	set := s.privs()
	return isSuperuser(set) || set.Global&privilege.ShowDB != 0 || infoschema.IsName(db) || set.AnyInDB(db)
}

// canSeeTable reports whether SHOW TABLES lists db.table for the session.
func (s *Session) canSeeTable(db, table string) bool {
	set := s.privs()
	return isSuperuser(set) || infoschema.IsName(db) || set.AnyOnTable(db, table)
}

// infoVisibility is what the session sees of the schema in
// INFORMATION_SCHEMA (infoschema.Visibility), read from its privileges
// each time a plan runs.
type infoVisibility struct{ s *Session }

func (v infoVisibility) DB(db string) bool           { return v.s.canSeeDB(db) }
func (v infoVisibility) Table(db, table string) bool { return v.s.canSeeTable(db, table) }

func (v infoVisibility) Column(db, table, col string) string {
	set := v.s.privs()
	p := privilege.ColumnLevel
	if !isSuperuser(set) {
		p &= set.Column(db, table, col)
	}
	return columnPrivNames(p)
}

// ViewColumns describes a view's columns for COLUMNS (none if its query
// no longer plans, say after a table it reads was dropped).
func (v infoVisibility) ViewColumns(schema *catalog.Schema, view *catalog.TableInfo) []*catalog.ColumnInfo {
	cols, err := v.s.viewColumns(schema, view)
	if err != nil {
		return nil
	}
	return cols
}

func (v infoVisibility) ViewDefinition(db, view string) bool {
	set := v.s.privs()
	return isSuperuser(set) || set.Table(db, view)&privilege.ShowView != 0
}

// columnPrivNames lists column privileges as COLUMNS.PRIVILEGES and SHOW
// FULL COLUMNS do: "select,insert,update,references" or part of it.
func columnPrivNames(p privilege.Priv) string {
	var b []byte
	for _, x := range []struct {
		p    privilege.Priv
		name string
	}{{privilege.Select, "select"}, {privilege.Insert, "insert"}, {privilege.Update, "update"}, {privilege.References, "references"}} {
		if p&x.p != 0 {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = append(b, x.name...)
		}
	}
	return string(b)
}

// checkShowDB checks SHOW TABLES, SHOW TABLE STATUS and SHOW CREATE
// DATABASE: as in MySQL, a database the session holds no privilege in
// answers 1044 whether it exists or not.
func (s *Session) checkShowDB(db string) error { return s.checkUse(db) }

// checkUse checks USE db / COM_INIT_DB: some privilege on the database.
func (s *Session) checkUse(db string) error {
	set := s.privs()
	if isSuperuser(set) || infoschema.IsName(db) || set.AnyInDB(db) {
		return nil
	}
	return s.dbDenied(db)
}
