package expr

import (
	"bufio"
	"crypto/md5"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/types"
)

// errSkip marks statements and queries outside what the single-table
// executor below supports; they are counted, not failed.
var errSkip = errors.New("skip unsupported")

// sltTable is an in-memory table: rows already converted to column types.
type sltTable struct {
	name  string
	cols  []string
	fts   []*ptypes.FieldType
	rows  [][]types.Datum
	dirty bool
}

// sltTableBinder resolves column names of one table to row positions.
type sltTableBinder struct {
	t     *sltTable
	alias string
}

func (b sltTableBinder) Bind(node ast.ExprNode) (Expr, error) {
	switch n := node.(type) {
	case *ast.ColumnNameExpr:
		if tn := n.Name.Table.L; tn != "" && tn != b.t.name && tn != b.alias {
			return nil, errors.New("skip qualifier")
		}
		for i, c := range b.t.cols {
			if c == n.Name.Name.L {
				return NewColumn(i, b.t.fts[i], c), nil
			}
		}
		return nil, errors.New("skip column")
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return nil, errors.New("skip subquery")
	case *ast.AggregateFuncExpr, *ast.WindowFuncExpr:
		return nil, errors.New("skip agg in wrong place")
	case *ast.PatternInExpr:
		if n.Sel != nil {
			return nil, errSkip
		}
	}
	return nil, nil
}

// sltRunner executes one sqllogictest file.
type sltRunner struct {
	t      *testing.T
	p      *parser.Parser
	tables map[string]*sltTable
	stats  map[string]int
	fails  []string
}

func (r *sltRunner) exec(sql string) error {
	stmt, err := r.p.ParseOneStmt(sql, "", "")
	if err != nil {
		return errSkip
	}
	switch s := stmt.(type) {
	case *ast.CreateTableStmt:
		t := &sltTable{name: s.Table.Name.L}
		for _, c := range s.Cols {
			t.cols = append(t.cols, c.Name.Name.L)
			t.fts = append(t.fts, c.Tp)
		}
		r.tables[t.name] = t
	case *ast.InsertStmt:
		tn := s.Table.TableRefs.Left.(*ast.TableSource).Source.(*ast.TableName).Name.L
		t := r.tables[tn]
		if t == nil {
			return errSkip
		}
		order := make([]int, len(t.cols))
		for i := range order {
			order[i] = i
		}
		if len(s.Columns) > 0 {
			order = order[:0]
			for _, c := range s.Columns {
				for i, n := range t.cols {
					if n == c.Name.L {
						order = append(order, i)
					}
				}
			}
		}
		for _, list := range s.Lists {
			row := make([]types.Datum, len(t.cols))
			for i, e := range list {
				ce, err := Compile(e, nil)
				if err != nil {
					return err
				}
				d, err := ce.Eval(&EvalContext{}, nil)
				if err != nil {
					return err
				}
				cv, err := types.Convert(d, t.fts[order[i]])
				if err != nil {
					return err
				}
				row[order[i]] = cv
			}
			t.rows = append(t.rows, row)
		}
		if sel, ok := s.Select.(*ast.SelectStmt); ok && !s.IsReplace && s.OnDuplicate == nil {
			src := r.tables[sel.From.TableRefs.Left.(*ast.TableSource).Source.(*ast.TableName).Name.L]
			if src == nil || sel.Where != nil || sel.From.TableRefs.Right != nil {
				t.dirty = true
				return errSkip
			}
			var fields []Expr
			for _, f := range sel.Fields.Fields {
				if f.WildCard != nil {
					for i, c := range src.cols {
						fields = append(fields, NewColumn(i, src.fts[i], c))
					}
					continue
				}
				e, err := Compile(f.Expr, sltTableBinder{t: src})
				if err != nil {
					t.dirty = true
					return errSkip
				}
				fields = append(fields, e)
			}
			for _, srow := range src.rows {
				row := make([]types.Datum, len(t.cols))
				for i, f := range fields {
					d, err := f.Eval(&EvalContext{}, srow)
					if err != nil {
						return err
					}
					if row[order[i]], err = types.Convert(d, t.fts[order[i]]); err != nil {
						return err
					}
				}
				t.rows = append(t.rows, row)
			}
			return nil
		}
		if s.Select != nil || s.IsReplace || s.OnDuplicate != nil {
			t.dirty = true
		}
	case *ast.DropTableStmt:
		for _, tn := range s.Tables {
			delete(r.tables, tn.Name.L)
		}
	case *ast.DeleteStmt:
		ts, ok := s.TableRefs.TableRefs.Left.(*ast.TableSource)
		if !ok {
			return errSkip
		}
		t := r.tables[ts.Source.(*ast.TableName).Name.L]
		if t == nil {
			return errSkip
		}
		if s.Where == nil {
			t.rows = nil
			return nil
		}
		w, err := Compile(s.Where, sltTableBinder{t: t})
		if err != nil {
			t.dirty = true
			return errSkip
		}
		var keep [][]types.Datum
		for _, row := range t.rows {
			d, err := w.Eval(&EvalContext{}, row)
			if err != nil {
				return err
			}
			if tr, _, _ := d.ToBool(); !tr {
				keep = append(keep, row)
			}
		}
		t.rows = keep
	case *ast.UpdateStmt:
		ts, ok := s.TableRefs.TableRefs.Left.(*ast.TableSource)
		if !ok || s.TableRefs.TableRefs.Right != nil {
			return errSkip
		}
		t := r.tables[ts.Source.(*ast.TableName).Name.L]
		if t == nil {
			return errSkip
		}
		b := sltTableBinder{t: t, alias: ts.AsName.L}
		var where Expr
		var err error
		if s.Where != nil {
			if where, err = Compile(s.Where, b); err != nil {
				t.dirty = true
				return errSkip
			}
		}
		type assign struct {
			col int
			e   Expr
		}
		var sets []assign
		for _, a := range s.List {
			col := -1
			for i, c := range t.cols {
				if c == a.Column.Name.L {
					col = i
				}
			}
			e, err := Compile(a.Expr, b)
			if col < 0 || err != nil {
				t.dirty = true
				return errSkip
			}
			sets = append(sets, assign{col, e})
		}
		for ri, row := range t.rows {
			if where != nil {
				d, err := where.Eval(&EvalContext{}, row)
				if err != nil {
					return err
				}
				if tr, _, _ := d.ToBool(); !tr {
					continue
				}
			}
			nr := append([]types.Datum{}, row...)
			for _, a := range sets {
				d, err := a.e.Eval(&EvalContext{}, nr)
				if err != nil {
					return err
				}
				if nr[a.col], err = types.Convert(d, t.fts[a.col]); err != nil {
					return err
				}
			}
			t.rows[ri] = nr
		}
	}
	return nil
}

type aggCollector struct {
	list []*ast.AggregateFuncExpr
	idx  map[*ast.AggregateFuncExpr]int
}

func (v *aggCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.AggregateFuncExpr:
		if _, ok := v.idx[x]; !ok {
			v.idx[x] = len(v.list)
			v.list = append(v.list, x)
		}
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}

func (v *aggCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

type groupBinder struct {
	tb   sltTableBinder
	aggs *aggCollector
	afs  []*AggFunc
}

func (b groupBinder) Bind(node ast.ExprNode) (Expr, error) {
	if a, ok := node.(*ast.AggregateFuncExpr); ok {
		k, ok := b.aggs.idx[a]
		if !ok {
			return nil, errSkip
		}
		return NewColumn(len(b.tb.t.cols)+k, b.afs[k].Type(), "agg"), nil
	}
	return b.tb.Bind(node)
}

type orderKey struct {
	e    Expr
	pos  int
	desc bool
}

func (r *sltRunner) query(sql string) (schema string, rows [][]string, err error) {
	stmt, err := r.p.ParseOneStmt(sql, "", "")
	if err != nil {
		return "", nil, errSkip
	}
	sel, ok := stmt.(*ast.SelectStmt)
	if !ok {
		return "", nil, errors.New("skip not select")
	}
	if sel.Limit != nil {
		return "", nil, errors.New("skip limit")
	}
	// SELECT without FROM reads one empty row.
	t := &sltTable{rows: [][]types.Datum{{}}}
	var alias string
	if sel.From != nil {
		if sel.From.TableRefs.Right != nil {
			return "", nil, errors.New("skip join")
		}
		ts, ok := sel.From.TableRefs.Left.(*ast.TableSource)
		if !ok {
			return "", nil, errSkip
		}
		tn, ok := ts.Source.(*ast.TableName)
		if !ok {
			return "", nil, errSkip
		}
		if t = r.tables[tn.Name.L]; t == nil {
			return "", nil, errors.New("skip no table")
		}
		alias = ts.AsName.L
	}
	if t.dirty {
		return "", nil, errors.New("skip dirty")
	}
	tb := sltTableBinder{t: t, alias: alias}
	var b Binder = tb
	source := t.rows
	aggs := &aggCollector{idx: map[*ast.AggregateFuncExpr]int{}}
	for _, f := range sel.Fields.Fields {
		if f.Expr != nil {
			f.Expr.Accept(aggs)
		}
	}
	if sel.Having != nil {
		sel.Having.Expr.Accept(aggs)
	}
	if sel.OrderBy != nil {
		for _, item := range sel.OrderBy.Items {
			item.Expr.Accept(aggs)
		}
	}
	if sel.GroupBy != nil || len(aggs.list) > 0 {
		var where Expr
		if sel.Where != nil {
			if where, err = Compile(sel.Where, tb); err != nil {
				return "", nil, err
			}
		}
		var groupBy []Expr
		if sel.GroupBy != nil {
			for _, item := range sel.GroupBy.Items {
				if _, ok := item.Expr.(*ast.PositionExpr); ok {
					return "", nil, errSkip
				}
				e, err := Compile(item.Expr, tb)
				if err != nil {
					return "", nil, err
				}
				groupBy = append(groupBy, e)
			}
		}
		var afs []*AggFunc
		for _, a := range aggs.list {
			var args []Expr
			for _, arg := range a.Args {
				e, err := Compile(arg, tb)
				if err != nil {
					return "", nil, err
				}
				args = append(args, e)
			}
			af, err := NewAggFunc(strings.ToLower(a.F), a.Distinct, args)
			if err != nil {
				return "", nil, err
			}
			afs = append(afs, af)
		}
		type group struct {
			first []types.Datum
			accs  []Accumulator
		}
		groups := map[string]*group{}
		var order []string
		ctx := &EvalContext{}
		newGroup := func(first []types.Datum) *group {
			g := &group{first: first}
			for _, af := range afs {
				g.accs = append(g.accs, af.NewAccumulator())
			}
			return g
		}
		if len(groupBy) == 0 {
			groups[""] = newGroup(make([]types.Datum, len(t.cols)))
			order = append(order, "")
		}
		for _, row := range t.rows {
			if where != nil {
				d, err := where.Eval(ctx, row)
				if err != nil {
					return "", nil, err
				}
				if tr, _, _ := d.ToBool(); !tr {
					continue
				}
			}
			var key []byte
			for _, e := range groupBy {
				d, err := e.Eval(ctx, row)
				if err != nil {
					return "", nil, err
				}
				key = d.AppendHashKey(key)
			}
			g := groups[string(key)]
			if g == nil {
				g = newGroup(row)
				groups[string(key)] = g
				order = append(order, string(key))
			}
			for _, acc := range g.accs {
				if err := acc.Add(ctx, row); err != nil {
					return "", nil, err
				}
			}
		}
		gb := groupBinder{tb: tb, aggs: aggs, afs: afs}
		var having Expr
		if sel.Having != nil {
			if having, err = Compile(sel.Having.Expr, gb); err != nil {
				return "", nil, err
			}
		}
		source = nil
		for _, k := range order {
			g := groups[k]
			row := append([]types.Datum{}, g.first...)
			for _, acc := range g.accs {
				row = append(row, acc.Result())
			}
			if having != nil {
				d, err := having.Eval(ctx, row)
				if err != nil {
					return "", nil, err
				}
				if tr, _, _ := d.ToBool(); !tr {
					continue
				}
			}
			source = append(source, row)
		}
		b = gb
		sel.Where = nil
	}
	var fields []Expr
	var names []string
	for _, f := range sel.Fields.Fields {
		if f.WildCard != nil {
			for i, c := range t.cols {
				fields = append(fields, NewColumn(i, t.fts[i], c))
				names = append(names, c)
			}
			continue
		}
		e, err := Compile(f.Expr, b)
		if err != nil {
			return "", nil, err
		}
		fields = append(fields, e)
		names = append(names, f.AsName.L)
	}
	var where Expr
	if sel.Where != nil {
		if where, err = Compile(sel.Where, b); err != nil {
			return "", nil, err
		}
	}
	var keys []orderKey
	if sel.OrderBy != nil {
		for _, item := range sel.OrderBy.Items {
			k := orderKey{pos: -1, desc: item.Desc}
			if v, ok := item.Expr.(*ast.PositionExpr); ok {
				k.pos = v.N - 1
			} else if v, ok := item.Expr.(*test_driver.ValueExpr); ok {
				k.pos = int(v.GetInt64()) - 1
			} else if cn, ok := item.Expr.(*ast.ColumnNameExpr); ok && cn.Name.Table.L == "" {
				for i, n := range names {
					if n != "" && n == cn.Name.Name.L {
						k.pos = i
					}
				}
			}
			if k.pos < 0 {
				if k.e, err = Compile(item.Expr, b); err != nil {
					return "", nil, err
				}
			}
			keys = append(keys, k)
		}
	}
	for _, f := range fields {
		switch classOf(f.Type()) {
		case classInt, classUint:
			schema += "I"
		case classDecimal, classReal:
			schema += "R"
		case classString, classTime:
			schema += "T"
		default:
			schema += "?"
		}
	}
	type outRow struct {
		vals []types.Datum
		keys []types.Datum
	}
	var out []outRow
	ctx := &EvalContext{}
	for _, row := range source {
		if where != nil {
			d, err := where.Eval(ctx, row)
			if err != nil {
				return "", nil, err
			}
			if tr, _, _ := d.ToBool(); !tr {
				continue
			}
		}
		o := outRow{}
		for _, f := range fields {
			d, err := f.Eval(ctx, row)
			if err != nil {
				return "", nil, err
			}
			o.vals = append(o.vals, d)
		}
		for _, k := range keys {
			if k.pos >= 0 {
				o.keys = append(o.keys, o.vals[k.pos])
				continue
			}
			d, err := k.e.Eval(ctx, row)
			if err != nil {
				return "", nil, err
			}
			o.keys = append(o.keys, d)
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool {
		for n, k := range keys {
			c, _ := types.Compare(out[i].keys[n], out[j].keys[n])
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return false
	})
	seen := map[string]bool{}
	for _, o := range out {
		var strs []string
		for i, d := range o.vals {
			strs = append(strs, sltFormat(d, schema[i]))
		}
		if sel.Distinct {
			k := strings.Join(strs, "\x00")
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		rows = append(rows, strs)
	}
	return schema, rows, nil
}

func sltFormat(d types.Datum, c byte) string {
	if d.IsNull() {
		return "NULL"
	}
	switch c {
	case 'I':
		if d.Kind() == types.KindUint64 {
			return strconv.FormatUint(d.Uint(), 10)
		}
		v, _ := d.ToInt64()
		return strconv.FormatInt(v, 10)
	case 'R':
		f, _ := d.ToFloat64()
		return fmt.Sprintf("%.3f", f)
	}
	s, _ := d.ToString()
	if s == "" {
		return "(empty)"
	}
	return s
}

func (r *sltRunner) runFile(path string) {
	fh, err := os.Open(path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var rec []string
	lineNo := 0
	halted := false
	flush := func() {
		defer func() { rec = rec[:0] }()
		if halted || len(rec) == 0 {
			return
		}
		for len(rec) > 0 && (strings.HasPrefix(rec[0], "skipif") || strings.HasPrefix(rec[0], "onlyif")) {
			f := strings.Fields(rec[0])
			if (f[0] == "skipif" && f[1] == "mysql") || (f[0] == "onlyif" && f[1] != "mysql") {
				return
			}
			rec = rec[1:]
		}
		if len(rec) == 0 {
			return
		}
		head := strings.Fields(rec[0])
		switch head[0] {
		case "halt":
			halted = true
		case "statement":
			err := r.exec(strings.Join(rec[1:], "\n"))
			if head[1] == "ok" && err != nil && err != errSkip {
				r.stats["stmt-fail"]++
				r.fails = append(r.fails, fmt.Sprintf("%s:%d statement: %v\n  %s", path, lineNo, err, strings.Join(rec[1:], " ")))
			}
		case "query":
			var sqlLines, expect []string
			i := 1
			for ; i < len(rec) && rec[i] != "----"; i++ {
				sqlLines = append(sqlLines, rec[i])
			}
			if i < len(rec) {
				expect = rec[i+1:]
			}
			sql := strings.Join(sqlLines, "\n")
			schema, rows, err := r.query(sql)
			if err != nil {
				if err == errSkip || strings.HasPrefix(err.Error(), "skip") {
					r.stats[err.Error()]++
					return
				}
				r.stats["error"]++
				r.fails = append(r.fails, fmt.Sprintf("%s:%d error %v\n  %s", path, lineNo, err, sql))
				return
			}
			r.stats["run"]++
			if schema != head[1] {
				r.stats["schema-mismatch"]++
				r.fails = append(r.fails, fmt.Sprintf("%s:%d schema %s want %s\n  %s", path, lineNo, schema, head[1], sql))
			}
			var vals []string
			mode := "nosort"
			if len(head) > 2 {
				mode = head[2]
			}
			switch mode {
			case "rowsort":
				sort.Slice(rows, func(a, b int) bool {
					for k := range rows[a] {
						if rows[a][k] != rows[b][k] {
							return rows[a][k] < rows[b][k]
						}
					}
					return false
				})
			}
			for _, row := range rows {
				vals = append(vals, row...)
			}
			if mode == "valuesort" {
				sort.Strings(vals)
			}
			var got []string
			if len(expect) == 1 && strings.Contains(expect[0], "values hashing to") {
				h := md5.New()
				for _, v := range vals {
					h.Write([]byte(v))
					h.Write([]byte("\n"))
				}
				got = []string{fmt.Sprintf("%d values hashing to %x", len(vals), h.Sum(nil))}
			} else {
				got = vals
			}
			if strings.Join(got, "\n") != strings.Join(expect, "\n") {
				r.stats["result-mismatch"]++
				g := strings.Join(got, " ")
				if len(g) > 300 {
					g = g[:300]
				}
				e := strings.Join(expect, " ")
				if len(e) > 300 {
					e = e[:300]
				}
				r.fails = append(r.fails, fmt.Sprintf("%s:%d result\n  %s\n  got  %s\n  want %s", path, lineNo, sql, g, e))
			}
		}
	}
	for sc.Scan() {
		lineNo++
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		rec = append(rec, l)
	}
	flush()
}

// TestSQLLogicTestSingleTable runs the sqllogictest corpus (MySQL 8
// expected results) through a minimal single-table executor built on this
// package: every query over one table without subqueries, joins or LIMIT,
// including WHERE, GROUP BY, HAVING, aggregates, DISTINCT and ORDER BY, must
// report MySQL's column types (I/R/T) and values. It checks expression
// semantics against MySQL's answers independently of the planner. Set
// STRATA_SLT_DIR to the corpus (e.g. /work/shared/sqllogictest) to run it.
func TestSQLLogicTestSingleTable(t *testing.T) {
	dir := os.Getenv("STRATA_SLT_DIR")
	if dir == "" {
		t.Skip("STRATA_SLT_DIR is not set")
	}
	var files []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".test") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no .test files under %s: %v", dir, err)
	}
	total := map[string]int{}
	var fails []string
	for _, f := range files {
		r := &sltRunner{t: t, p: parser.New(), tables: map[string]*sltTable{}, stats: map[string]int{}}
		r.runFile(f)
		for k, v := range r.stats {
			total[k] += v
		}
		fails = append(fails, r.fails...)
	}
	t.Logf("%d queries checked; skipped: %v", total["run"], total)
	if total["run"] == 0 {
		t.Fatal("no query was checked")
	}
	for i, f := range fails {
		if i == 50 {
			t.Errorf("... and %d more", len(fails)-50)
			break
		}
		t.Error(f)
	}
}
