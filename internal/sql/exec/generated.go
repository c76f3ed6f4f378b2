package exec

import (
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// Generated columns (STORED and VIRTUAL alike) are computed whenever a row
// is written, after its other columns, and kept in the row: a VIRTUAL
// column costs storage here, where MySQL computes it on read, and reads
// the same.

// genExprs caches the compiled expressions of a table definition's
// generated columns (by offset; nil for other columns).
var genExprs sync.Map // *catalog.TableInfo -> []expr.Expr

// genBinder resolves column names of a generated column's expression to
// the offsets of the row being written.
type genBinder struct {
	t    *catalog.TableInfo
	self *catalog.ColumnInfo
}

func (b genBinder) Bind(n ast.ExprNode) (expr.Expr, error) {
	switch x := n.(type) {
	case *ast.ColumnNameExpr:
		c := b.t.Column(x.Name.Name.O)
		if c == nil {
			return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'generated column function'", x.Name.Name.O)
		}
		if c.IsGenerated() && c.Offset >= b.self.Offset {
			return nil, sqlerr.New(3107, "HY000", "Generated column can refer only to generated columns defined prior to it.")
		}
		if c.AutoIncrement {
			return nil, sqlerr.New(3109, "HY000", "Generated column '%s' cannot refer to auto-increment column.", b.self.Name)
		}
		return expr.NewColumn(c.Offset, c.Type, c.Name), nil
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.AggregateFuncExpr, *ast.VariableExpr, *ast.WindowFuncExpr:
		return nil, sqlerr.New(3102, "HY000", "Expression of generated column '%s' contains a disallowed function.", b.self.Name)
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case "rand", "now", "current_timestamp", "sysdate", "uuid", "connection_id", "last_insert_id", "sleep", "curdate", "unix_timestamp", "user", "database":
			return nil, sqlerr.New(3102, "HY000", "Expression of generated column '%s' contains a disallowed function.", b.self.Name)
		}
	}
	return nil, nil
}

func compileGenerated(t *catalog.TableInfo, c *catalog.ColumnInfo) (expr.Expr, error) {
	st, err := parser.New().ParseOneStmt("SELECT "+c.GeneratedExpr, "", "")
	if err != nil {
		return nil, sqlerr.New(sqlerr.ErParse, "42000", "invalid generated column expression: %s", c.GeneratedExpr)
	}
	sel, ok := st.(*ast.SelectStmt)
	if !ok || len(sel.Fields.Fields) != 1 {
		return nil, sqlerr.New(sqlerr.ErParse, "42000", "invalid generated column expression: %s", c.GeneratedExpr)
	}
	return expr.Compile(sel.Fields.Fields[0].Expr, genBinder{t: t, self: c})
}

// CheckGenerated compiles a generated column's expression, returning the
// error MySQL gives for a bad one.
func CheckGenerated(t *catalog.TableInfo, c *catalog.ColumnInfo) error {
	_, err := compileGenerated(t, c)
	return err
}

func generatedOf(t *catalog.TableInfo) ([]expr.Expr, error) {
	if v, ok := genExprs.Load(t); ok {
		return v.([]expr.Expr), nil
	}
	var out []expr.Expr
	for _, c := range t.Columns {
		if !c.IsGenerated() {
			continue
		}
		if out == nil {
			out = make([]expr.Expr, len(t.Columns))
		}
		e, err := compileGenerated(t, c)
		if err != nil {
			return nil, err
		}
		out[c.Offset] = e
	}
	genExprs.Store(t, out)
	return out, nil
}

// hasGenerated reports whether t has generated columns (cheaply).
func hasGenerated(t *catalog.TableInfo) bool {
	for _, c := range t.Columns {
		if c.GeneratedExpr != "" {
			return true
		}
	}
	return false
}

// generate computes the generated columns of row, in column order.
func (w *writer) generate(row []types.Datum) error {
	if !w.gen {
		return nil
	}
	exprs, err := generatedOf(w.t)
	if err != nil {
		return err
	}
	for off, e := range exprs {
		if e == nil {
			continue
		}
		col := w.t.Columns[off]
		v, err := e.Eval(w.c.Eval, row)
		if err != nil {
			return err
		}
		if v, err = types.ConvertColumn(v, col.Type, col.Name, 1); err != nil {
			return err
		}
		if v.IsNull() && col.NotNull {
			return sqlerr.New(sqlerr.ErBadNull, "23000", "Column '%s' cannot be null", col.Name)
		}
		row[off] = v
	}
	return nil
}

func errGeneratedValue(col, table string) error {
	return sqlerr.New(3105, "HY000", "The value specified for generated column '%s' in table '%s' is not allowed.", col, table)
}

// RewriteColumns rewrites every row of a table whose columns changed type
// (ALTER TABLE MODIFY / CHANGE) from the old definition to the new one:
// each value is converted to its new type (a value that does not fit
// fails the statement, as in MySQL's strict mode), generated columns are
// computed again, and index entries that changed are replaced.
func RewriteColumns(c *Context, old, nt *catalog.TableInfo) error {
	ow := newWriter(c, old)
	nw := newWriter(c, nt)
	prefix := tablecodec.RecordPrefix(old.ID)
	it, err := c.Txn.Iter(c.Ctx, prefix, tablecodec.PrefixEnd(prefix), false)
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	for it.Valid() {
		n++
		_, h, err := tablecodec.DecodeRecordKey(it.Key())
		if err != nil {
			return err
		}
		row, err := ow.l.decode(h, it.Value(), 0)
		if err != nil {
			return err
		}
		upd := make([]types.Datum, len(row))
		for i, col := range nt.Columns {
			v, err := types.ConvertColumn(row[i], col.Type, col.Name, n)
			if err != nil {
				return err
			}
			if v.IsNull() && col.NotNull {
				return sqlerr.New(1138, "22004", "Invalid use of NULL value")
			}
			upd[i] = v
		}
		if err := nw.generate(upd); err != nil {
			return err
		}
		if err := ow.removeRow(h, row); err != nil {
			return err
		}
		if err := nw.putRow(h, upd); err != nil {
			return err
		}
		if c.Writes.Len() >= BatchSize {
			if err := c.Writes.Flush(); err != nil {
				return err
			}
		}
		if err := it.Next(c.Ctx); err != nil {
			return err
		}
	}
	return nil
}
