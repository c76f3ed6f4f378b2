package server

import (
	"context"
	"testing"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// vitess parses every COM_STMT_PREPARE with its own grammar before the
// handler sees it, and answers a parse failure with an error. These are
// statements real clients prepare; they must get through that step.
func TestVitessAcceptsCommonPreparedStatements(t *testing.T) {
	stmts := []string{
		// sysbench oltp_read_write / oltp_point_select / oltp_insert
		"SELECT c FROM sbtest1 WHERE id=?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
		"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
		"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
		"UPDATE sbtest1 SET k=k+1 WHERE id=?",
		"UPDATE sbtest1 SET c=? WHERE id=?",
		"DELETE FROM sbtest1 WHERE id=?",
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)",
		"BEGIN",
		"COMMIT",
		// ORMs and drivers
		"SELECT * FROM t WHERE id = ? FOR UPDATE",
		"SELECT * FROM t WHERE a IN (?, ?, ?) LIMIT ?",
		"SELECT * FROM t LIMIT ?, ?",
		"INSERT INTO t (a, b) VALUES (?, ?) ON DUPLICATE KEY UPDATE b = VALUES(b)",
		"REPLACE INTO t (a) VALUES (?)",
		"SELECT @@version, @@session.autocommit, DATABASE()",
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?",
		"SHOW TABLES",
		"SELECT CAST(? AS SIGNED), CONCAT(?, 'x'), NOW(), COALESCE(?, 1)",
		"SELECT a FROM t1 JOIN t2 ON t1.id = t2.id WHERE t1.x > ? GROUP BY a HAVING COUNT(*) > ? ORDER BY a DESC",
	}
	for _, q := range stmts {
		if _, err := sqlparser.ParseWithOptions(context.Background(), q, sqlparser.ParserOptions{}); err != nil {
			t.Errorf("vitess rejects %q: %v", q, err)
		}
	}
}
