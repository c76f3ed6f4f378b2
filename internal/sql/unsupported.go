package sql

import (
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Unsupported features answer 1235 (ER_NOT_SUPPORTED_YET) naming the
// feature in words, as MySQL's "This version of MySQL doesn't yet support
// '...'" does: the statement's leading keywords, never a Go type.

// notSupported is the 1235 error for feature.
func notSupported(feature string) error {
	return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '%s'", feature)
}

// leadingKeywords matches the keywords a statement starts with, up to the
// first name, value or parenthesis, after comments.
var leadingKeywords = regexp.MustCompile(`^(?:\s|/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)*((?:[A-Za-z_]+\s*)+)`)

// keywordsNamingAStatement are the words of a statement's name: `CREATE
// DEFINER = x PROCEDURE p` is 'CREATE PROCEDURE'.
var keywordsNamingAStatement = map[string]bool{
	"CREATE": true, "DROP": true, "ALTER": true, "SHOW": true, "KILL": true, "GRANT": true, "REVOKE": true,
	"TRIGGER": true, "PROCEDURE": true, "FUNCTION": true, "EVENT": true, "SERVER": true, "TABLESPACE": true,
	"LOGFILE": true, "GROUP": true, "SPATIAL": true, "REFERENCE": true, "SYSTEM": true, "RESOURCE": true,
	"USER": true, "ROLE": true, "CALL": true, "HANDLER": true, "XA": true, "INSTALL": true, "UNINSTALL": true,
	"PLUGIN": true, "COMPONENT": true, "LOAD": true, "XML": true, "INDEX": true, "CHECK": true, "TABLE": true,
	"REPAIR": true, "OPTIMIZE": true, "ANALYZE": true, "CHECKSUM": true, "CACHE": true, "FLUSH": true,
	"RESET": true, "PURGE": true, "CHANGE": true, "REPLICATION": true, "SOURCE": true, "MASTER": true,
	"START": true, "STOP": true, "SLAVE": true, "REPLICA": true, "BINLOG": true, "SIGNAL": true,
	"RESIGNAL": true, "GET": true, "DIAGNOSTICS": true, "IMPORT": true, "CLONE": true, "RENAME": true,
	"SHUTDOWN": true, "RESTART": true, "SET": true, "PASSWORD": true, "DEFAULT": true, "AGGREGATE": true,
	"UNDO": true, "DATABASE": true, "SCHEMA": true, "VIEW": true, "SEQUENCE": true, "STATUS": true,
	"PROCESSLIST": true, "FULL": true, "GLOBAL": true, "SESSION": true, "MASTER_LOGS": true,
	"PROFILE": true, "PROFILES": true, "GRANTS": true, "PRIVILEGES": true, "ERRORS": true, "WARNINGS": true,
	"OPEN": true, "TABLES": true, "RELAYLOG": true, "EVENTS": true, "LOGS": true, "HELP": true,
	"INDEXES": true, "KEYS": true, "STORAGE": true, "ENGINE": true, "ENGINES": true, "PLACEMENT": true,
	"POLICY": true, "TEMPORARY": true, "UNDEFINED": true, "MERGE": true, "TEMPTABLE": true,
	"ALGORITHM": true, "OR": true, "REPLACE": true, "IF": true, "NOT": true, "EXISTS": true,
}

// statementName is the name of the statement text starts with: its
// leading keywords, upper case, without optional modifiers.
func statementName(text string) string {
	m := leadingKeywords.FindStringSubmatch(text)
	if m == nil {
		return "this statement"
	}
	var words []string
	for _, w := range strings.Fields(m[1]) {
		u := strings.ToUpper(w)
		if !keywordsNamingAStatement[u] {
			break
		}
		switch u {
		case "DEFINER", "ALGORITHM", "UNDEFINED", "MERGE", "TEMPTABLE", "OR", "REPLACE", "IF", "NOT", "EXISTS":
			continue
		}
		words = append(words, u)
		if len(words) == 3 {
			break
		}
	}
	if len(words) == 0 {
		return "this statement"
	}
	return strings.Join(words, " ")
}

// stmtName names a parsed statement.
func stmtName(st ast.StmtNode) string { return statementName(st.Text()) }

// showName names a SHOW statement.
func showName(n *ast.ShowStmt) string { return statementName(n.Text()) }

// unsupportedStatements are statements the parser does not know and MySQL
// has: a syntax error would be wrong, they are features Strata lacks.
var unsupportedStatements = regexp.MustCompile(`(?is)^(?:\s|/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)*` +
	`(create\s+(?:definer\s*=\s*\S+\s+)?(?:aggregate\s+)?(?:trigger|procedure|function|event|server|tablespace|logfile\s+group|spatial\s+reference\s+system|resource\s+group)` +
	`|drop\s+(?:trigger|procedure|function|event|server|tablespace|logfile\s+group|spatial\s+reference\s+system|resource\s+group)` +
	`|alter\s+(?:definer\s*=\s*\S+\s+)?(?:procedure|function|event|server|tablespace|logfile\s+group|resource\s+group)` +
	`|call|handler|xa|install\s+(?:plugin|component)|uninstall\s+(?:plugin|component)|load\s+xml|signal|resign?al|get\s+diagnostics` +
	`|import\s+table|clone|checksum\s+table|repair\s+table|optimize\s+table|check\s+table|cache\s+index|load\s+index` +
	`|purge\s+binary|change\s+(?:master|replication)|start\s+(?:slave|replica|group_replication)|stop\s+(?:slave|replica|group_replication)` +
	`|shutdown|restart)\b`)

// unsupportedStatement reports, for a query the parser refused, whether it
// is a statement MySQL has and Strata does not, and its name.
func unsupportedStatement(query string) (string, bool) {
	m := unsupportedStatements.FindStringSubmatch(query)
	if m == nil {
		return "", false
	}
	name := definerClause.ReplaceAllString(m[1], " ")
	return strings.Join(strings.Fields(strings.ToUpper(name)), " "), true
}

var definerClause = regexp.MustCompile(`(?i)\s+definer\s*=\s*\S+\s+`)

// quotedBinary matches a Go-quoted string with escapes in it: the way the
// storage layers print internal keys ("t\x80\x00...").
var quotedBinary = regexp.MustCompile(`"(?:[^"\\]|\\.)*\\(?:x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4})(?:[^"\\]|\\.)*"`)

// redactKeys removes internal keys from the text of an unexpected error
// before it reaches a client: they mean nothing to a user.
func redactKeys(msg string) string { return quotedBinary.ReplaceAllString(msg, "<key>") }

// RedactKeys is redactKeys for the MySQL server's last-resort errors.
func RedactKeys(msg string) string { return redactKeys(msg) }
