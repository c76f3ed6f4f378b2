package plan

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Common table expressions (WITH). A reference to a non-recursive CTE is
// planned as a derived table of its query, once per reference. A recursive
// CTE (WITH RECURSIVE, whose query is seed UNION [ALL] recursive part) is a
// RecursiveCTE node: exec runs the seed, then the recursive part again and
// again over the rows the previous round produced (read through CTEScan)
// until a round produces none.

// cteDef is a CTE in scope while a query is planned.
type cteDef struct {
	node *ast.CommonTableExpression
	// level is the length of Builder.ctes before this CTE: its query sees
	// only the CTEs before it (and itself, if recursive).
	level     int
	recursive bool
	// While the recursive part is planned: the working table and the
	// seed's columns.
	work     *CTEWork
	seedCols []*Column
}

// CTEWork holds the rows of the previous round of a recursive CTE; exec
// fills it before each round.
type CTEWork struct {
	Rows [][]types.Datum
}

// CTEScan reads the working table of a recursive CTE (inside its recursive
// part).
type CTEScan struct {
	base
	Name string
	Work *CTEWork
}

func (*CTEScan) Children() []Plan  { return nil }
func (c *CTEScan) Explain() string { return "CTEScan " + c.Name }

// RecursiveCTE produces Seed's rows, then Rec's rows round after round,
// each round reading the previous one's rows through Work, until a round
// adds nothing. With Distinct (UNION rather than UNION ALL) rows already
// produced are dropped.
type RecursiveCTE struct {
	base
	Name      string
	Seed, Rec Plan
	Distinct  bool
	Work      *CTEWork
}

func (r *RecursiveCTE) Children() []Plan { return []Plan{r.Seed, r.Rec} }
func (r *RecursiveCTE) Explain() string {
	if r.Distinct {
		return "RecursiveCTE " + r.Name + " distinct"
	}
	return "RecursiveCTE " + r.Name
}

// pushWith brings the CTEs of a WITH clause into scope; pop removes them.
func (b *Builder) pushWith(w *ast.WithClause) (pop func(), err error) {
	saved := len(b.ctes)
	for _, c := range w.CTEs {
		for _, o := range b.ctes[saved:] {
			if strings.EqualFold(o.node.Name.O, c.Name.O) {
				b.ctes = b.ctes[:saved]
				return nil, sqlerr.New(1066, "42000", "Not unique table/alias: '%s'", c.Name.O)
			}
		}
		def := &cteDef{node: c, level: len(b.ctes), recursive: w.IsRecursive && refersTo(c.Query.Query, c.Name.O)}
		b.ctes = append(b.ctes, def)
	}
	return func() { b.ctes = b.ctes[:saved] }, nil
}

// findCTE resolves an unqualified table name to a CTE in scope.
func (b *Builder) findCTE(tn *ast.TableName) *cteDef {
	if tn.Schema.O != "" {
		return nil
	}
	for i := len(b.ctes) - 1; i >= 0; i-- {
		if strings.EqualFold(b.ctes[i].node.Name.O, tn.Name.O) {
			return b.ctes[i]
		}
	}
	return nil
}

// buildCTERef plans one reference to a CTE under alias.
func (b *Builder) buildCTERef(sc *scope, cte *cteDef, alias string) (*leaf, error) {
	if cte.work != nil {
		// Inside the recursive part: the previous round's rows.
		p := &CTEScan{Name: cte.node.Name.O, Work: cte.work}
		for _, c := range cte.seedCols {
			cc := *c
			cc.Table, cc.OrgTable, cc.DB = alias, alias, ""
			p.cols = append(p.cols, &cc)
			sc.add("", alias, &cc)
		}
		return &leaf{plan: p, scope: sc}, nil
	}
	saved := b.ctes
	b.ctes = b.ctes[:cte.level:cte.level]
	if cte.recursive {
		b.ctes = append(b.ctes, cte)
	}
	p, err := b.buildCTEQuery(cte)
	b.ctes = saved
	if err != nil {
		return nil, err
	}
	names := cte.node.ColNameList
	if len(names) > 0 && len(names) != len(p.Columns()) {
		return nil, sqlerr.New(1353, "HY000", "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts")
	}
	cols := make([]*Column, len(p.Columns()))
	for i, c := range p.Columns() {
		cc := *c
		cc.Table, cc.OrgTable, cc.DB = alias, alias, ""
		if i < len(names) {
			cc.Name = names[i].O
		}
		cols[i] = &cc
		sc.add("", alias, &cc)
	}
	return &leaf{plan: &Projection{base: base{cols}, Child: p, Exprs: identity(p.Columns())}, scope: sc}, nil
}

func (b *Builder) buildCTEQuery(cte *cteDef) (Plan, error) {
	q := cte.node.Query.Query
	if !cte.recursive {
		return b.buildResultSet(q, nil, nil)
	}
	so, ok := q.(*ast.SetOprStmt)
	if !ok || so.SelectList == nil {
		return nil, sqlerr.New(3573, "HY000", "Recursive Common Table Expression '%s' should contain a UNION", cte.node.Name.O)
	}
	if so.OrderBy != nil || so.Limit != nil {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ORDER BY / LIMIT over a recursive common table expression")
	}
	sels := so.SelectList.Selects
	split := -1
	for i, s := range sels {
		if refersTo(s, cte.node.Name.O) {
			split = i
			break
		}
	}
	if split <= 0 {
		return nil, sqlerr.New(3574, "HY000", "Recursive Common Table Expression '%s' should have one or more non-recursive query blocks followed by one or more recursive ones", cte.node.Name.O)
	}
	for _, s := range sels[split:] {
		if !refersTo(s, cte.node.Name.O) {
			return nil, sqlerr.New(3574, "HY000", "Recursive Common Table Expression '%s' should have one or more non-recursive query blocks followed by one or more recursive ones", cte.node.Name.O)
		}
	}
	var distinct bool
	switch x := sels[split].(type) {
	case *ast.SelectStmt:
		distinct = x.AfterSetOperator == nil || *x.AfterSetOperator == ast.Union
	case *ast.SetOprSelectList:
		distinct = x.AfterSetOperator == nil || *x.AfterSetOperator == ast.Union
	}
	// The seed must not see the CTE itself.
	saved := b.ctes
	b.ctes = b.ctes[:len(b.ctes)-1]
	seed, err := b.buildSetOprList(&ast.SetOprSelectList{Selects: sels[:split]}, nil, nil)
	b.ctes = saved
	if err != nil {
		return nil, err
	}
	seedCols := seed.Columns()
	if names := cte.node.ColNameList; len(names) > 0 {
		if len(names) != len(seedCols) {
			return nil, sqlerr.New(1353, "HY000", "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts")
		}
		renamed := make([]*Column, len(seedCols))
		for i, c := range seedCols {
			cc := *c
			cc.Name = names[i].O
			renamed[i] = &cc
		}
		seedCols = renamed
	}
	work := &CTEWork{}
	cte.work, cte.seedCols = work, seedCols
	recSels := make([]ast.Node, len(sels)-split)
	copy(recSels, sels[split:])
	rec, err := b.buildSetOprList(&ast.SetOprSelectList{Selects: recSels}, nil, nil)
	cte.work, cte.seedCols = nil, nil
	if err != nil {
		return nil, err
	}
	if len(rec.Columns()) != len(seedCols) {
		return nil, sqlerr.New(1222, "21000", "The used SELECT statements have a different number of columns")
	}
	return &RecursiveCTE{base: base{seedCols}, Name: cte.node.Name.O, Seed: seed, Rec: rec, Distinct: distinct, Work: work}, nil
}

// refersTo reports whether a query names table name (unqualified) anywhere.
func refersTo(n ast.Node, name string) bool {
	v := &tableRefFinder{name: name}
	n.Accept(v)
	return v.found
}

type tableRefFinder struct {
	name  string
	found bool
}

func (v *tableRefFinder) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok && tn.Schema.O == "" && strings.EqualFold(tn.Name.O, v.name) {
		v.found = true
	}
	return n, v.found
}

func (v *tableRefFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }
