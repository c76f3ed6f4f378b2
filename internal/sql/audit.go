package sql

import (
	"errors"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/audit"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// auditClass is "ddl" or "dcl" for the statements the audit log records
// (Options.Audit), "" for the others.
func auditClass(st ast.StmtNode) string {
	switch st.(type) {
	case *ast.CreateUserStmt, *ast.AlterUserStmt, *ast.DropUserStmt, *ast.RenameUserStmt,
		*ast.GrantStmt, *ast.RevokeStmt, *ast.GrantRoleStmt, *ast.RevokeRoleStmt, *ast.GrantProxyStmt,
		*ast.SetPwdStmt, *ast.SetDefaultRoleStmt:
		return "dcl"
	case ast.DDLNode:
		return "ddl"
	}
	return ""
}

// auditStatement records a DDL or DCL statement and its outcome: the
// statement normalised (literals, passwords among them, replaced by ?)
// and its digest.
func (s *Session) auditStatement(st ast.StmtNode, class string, err error) {
	text := st.Text()
	if text == "" {
		text = st.OriginalText()
	}
	norm, digest := parser.NormalizeDigest(text)
	e := audit.Event{Event: "statement", Protocol: "mysql", User: s.user, Host: s.host, ConnID: uint64(s.connID),
		Class: class, Digest: digest.String(), Statement: norm, Outcome: "success"}
	if err != nil {
		e.Outcome, e.ErrorCode = "failure", int(sqlerr.ErUnknown)
		var se *sqlerr.Error
		if errors.As(err, &se) {
			e.ErrorCode = int(se.Code)
		}
	}
	s.e.audit.Log(e)
}
