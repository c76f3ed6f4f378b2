// Package privilege owns accounts, roles and privileges: what is stored in
// the cluster (store.go), the immutable snapshot every node caches and
// matches logins against (snapshot.go), the effective privileges of a
// session and the checks statements make (set.go), and password hashes
// (password.go).
//
// Storage and caching. Every account is one JSON record under "mUser" in
// the transactional key space, next to the catalog; "mPrivVersion" counts
// changes. A statement that changes accounts (CREATE USER, GRANT, ...)
// rewrites the records it touches and bumps the version in one
// transaction, so every node sees either all of it or none. Engines load
// a Snapshot of all accounts and keep it until the version moves: the
// engine that committed the change installs the new snapshot at once,
// the others within one poll of the version (the same loop that polls the
// schema version, every 50 ms). A privilege check is therefore a few map
// lookups in memory, never a KV read.
//
// Matching. A login names a user and comes from a host; the account used
// is the most specific (user, host pattern) that matches, as in MySQL:
// literal hosts before patterns, longer literal prefixes before shorter,
// '%' last. 'localhost' matches any loopback address.
//
// Contract: Snapshots, Accounts and Sets are immutable once built; callers
// must not modify them. Changes go through Mutate, which copies.
package privilege

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Priv is a set of privileges, one bit each.
type Priv uint32

// The privileges. GrantOpt is GRANT OPTION: held at a level, it lets the
// holder grant the privileges it holds at that level.
const (
	Select Priv = 1 << iota
	Insert
	Update
	Delete
	Create
	Drop
	Reload
	Shutdown
	Process
	File
	GrantOpt
	References
	Index
	Alter
	ShowDB
	Super
	CreateTmpTable
	LockTables
	Execute
	ReplSlave
	ReplClient
	CreateView
	ShowView
	CreateRoutine
	AlterRoutine
	CreateUser
	Event
	Trigger
	CreateRole
	DropRole
)

// All is ALL PRIVILEGES at the global level: everything but GRANT OPTION.
const All = (DropRole<<1 - 1) &^ GrantOpt

// The privileges each level can hold (MySQL's rules).
const (
	globalOnly = Reload | Shutdown | Process | File | ShowDB | Super | ReplSlave | ReplClient | CreateUser | CreateRole | DropRole
	DBLevel    = All &^ globalOnly
	TableLevel = Select | Insert | Update | Delete | Create | Drop | References | Index | Alter | CreateView | ShowView | Trigger
	// ColumnLevel privileges may be granted on single columns.
	ColumnLevel = Select | Insert | Update | References
)

// names are the privileges in the order MySQL lists them in SHOW GRANTS.
var names = []struct {
	p    Priv
	name string
}{
	{Select, "SELECT"}, {Insert, "INSERT"}, {Update, "UPDATE"}, {Delete, "DELETE"}, {Create, "CREATE"}, {Drop, "DROP"},
	{Reload, "RELOAD"}, {Shutdown, "SHUTDOWN"}, {Process, "PROCESS"}, {File, "FILE"}, {References, "REFERENCES"},
	{Index, "INDEX"}, {Alter, "ALTER"}, {ShowDB, "SHOW DATABASES"}, {Super, "SUPER"}, {CreateTmpTable, "CREATE TEMPORARY TABLES"},
	{LockTables, "LOCK TABLES"}, {Execute, "EXECUTE"}, {ReplSlave, "REPLICATION SLAVE"}, {ReplClient, "REPLICATION CLIENT"},
	{CreateView, "CREATE VIEW"}, {ShowView, "SHOW VIEW"}, {CreateRoutine, "CREATE ROUTINE"}, {AlterRoutine, "ALTER ROUTINE"},
	{CreateUser, "CREATE USER"}, {Event, "EVENT"}, {Trigger, "TRIGGER"}, {CreateRole, "CREATE ROLE"}, {DropRole, "DROP ROLE"},
}

// Names lists the privileges of p (GRANT OPTION excluded), in MySQL's order.
func (p Priv) Names() []string {
	var out []string
	for _, n := range names {
		if p&n.p != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// String is p as SHOW GRANTS prints it.
func (p Priv) String() string { return strings.Join(p.Names(), ", ") }

// Name is the name of the lowest privilege of p, as error messages use it.
func (p Priv) Name() string {
	for _, n := range names {
		if p&n.p != 0 {
			return n.name
		}
	}
	if p&GrantOpt != 0 {
		return "GRANT"
	}
	return "USAGE"
}

// fromParser maps the parser's privilege types; ok is false for a
// privilege Strata does not know.
var fromParser = map[mysql.PrivilegeType]Priv{
	mysql.SelectPriv: Select, mysql.InsertPriv: Insert, mysql.UpdatePriv: Update, mysql.DeletePriv: Delete,
	mysql.CreatePriv: Create, mysql.DropPriv: Drop, mysql.ReloadPriv: Reload, mysql.ShutdownPriv: Shutdown,
	mysql.ProcessPriv: Process, mysql.FilePriv: File, mysql.GrantPriv: GrantOpt, mysql.ReferencesPriv: References,
	mysql.IndexPriv: Index, mysql.AlterPriv: Alter, mysql.ShowDBPriv: ShowDB, mysql.SuperPriv: Super,
	mysql.CreateTMPTablePriv: CreateTmpTable, mysql.LockTablesPriv: LockTables, mysql.ExecutePriv: Execute,
	mysql.ReplicationSlavePriv: ReplSlave, mysql.ReplicationClientPriv: ReplClient, mysql.CreateViewPriv: CreateView,
	mysql.ShowViewPriv: ShowView, mysql.CreateRoutinePriv: CreateRoutine, mysql.AlterRoutinePriv: AlterRoutine,
	mysql.CreateUserPriv: CreateUser, mysql.EventPriv: Event, mysql.TriggerPriv: Trigger,
	mysql.CreateRolePriv: CreateRole, mysql.DropRolePriv: DropRole, mysql.UsagePriv: 0,
}

// FromParser converts a privilege of a GRANT or REVOKE statement; ALL
// becomes the given level's full set. ok is false for one Strata does not
// support.
func FromParser(t mysql.PrivilegeType, level Priv) (Priv, bool) {
	if t == mysql.AllPriv {
		return level, true
	}
	p, ok := fromParser[t]
	return p, ok
}
