package expr

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Collations. A comparison of two text operands, LIKE, IN, BETWEEN, MIN,
// MAX, and the executor's ORDER BY, GROUP BY, DISTINCT and join keys order
// text by a collation chosen at compile time from the operands' types, as
// MySQL's coercibility rules choose it (simplified):
//
//   - an explicit COLLATE clause (coercibility 0) wins;
//   - then a column's collation (2);
//   - then other expressions' (string functions, CAST: 3), whose type
//     carries the default collation;
//   - then literals, ? parameters and variables (4), which are in the
//     default, utf8mb4_0900_ai_ci (collation_connection is not consulted);
//   - between two operands of equal coercibility and different
//     collations, a binary one wins, otherwise the left one (MySQL refuses
//     such a mix with 1267).
//
// A nil *collate.Collation is byte-wise comparison, the path every binary
// string, utf8mb4_bin column and column of a table stored before
// collations were in force takes, at the cost of one nil check.

// Collated is e COLLATE name: e's value with the named collation.
type Collated struct {
	E    Expr
	Name string
	coll *collate.Collation
	ft   *ptypes.FieldType
}

func (c *compiler) setCollation(n *ast.SetCollationExpr) (Expr, error) {
	e, err := c.compile(n.Expr)
	if err != nil {
		return nil, err
	}
	name := n.Collate
	coll := collate.Lookup(name)
	if coll == nil && !knownBinaryCollation(name) {
		return nil, sqlerr.New(1273, "HY000", "Unknown collation: '%s'", name)
	}
	ft := e.Type().Clone()
	if k := types.KindForFieldType(ft); k != types.KindString && k != types.KindBytes {
		ft = stringType(ft.GetFlen())
	}
	ft.SetCollate(name)
	return &Collated{E: e, Name: name, coll: coll, ft: ft}, nil
}

func knownBinaryCollation(name string) bool {
	switch name {
	case "binary", "utf8mb4_bin", "utf8mb4_0900_bin", "utf8mb3_bin", "utf8_bin", "latin1_bin", "latin1_general_cs", "ascii_bin":
		return true
	}
	return false
}

// Eval implements Expr.
func (c *Collated) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	return c.E.Eval(ctx, row)
}

// Type implements Expr.
func (c *Collated) Type() *ptypes.FieldType { return c.ft }

func (c *Collated) String() string { return "(" + c.E.String() + " COLLATE " + c.Name + ")" }

var defaultCollation = collate.Lookup(collate.Default)

// collationOf returns the collation e's text compares by and its
// coercibility (lower wins).
func collationOf(e Expr) (*collate.Collation, int) {
	switch n := e.(type) {
	case *Collated:
		return n.coll, 0
	case *Column:
		return types.CollationOf(n.ft), 2
	case *Param, *Variable:
		return defaultCollation, 4
	case *Constant:
		if n.Value.Kind() == types.KindBytes {
			return nil, 4
		}
		return types.CollationOf(n.ft), 4
	}
	return types.CollationOf(e.Type()), 3
}

// CollationOf returns the collation by which the executor orders, groups
// and hashes the text values of e (nil: byte-wise).
func CollationOf(e Expr) *collate.Collation {
	c, _ := collationOf(e)
	return c
}

// PairCollation returns the collation comparing l with r: nil unless both
// may be text (see the rules above).
func PairCollation(l, r Expr) *collate.Collation {
	lc, rc := classOf(l.Type()), classOf(r.Type())
	if (lc != classString && lc != classUnknown) || (rc != classString && rc != classUnknown) {
		return nil
	}
	// A binary string operand (BINARY x, VARBINARY, BLOB) makes the
	// comparison binary, whatever the coercibility, as in MySQL.
	if types.KindForFieldType(l.Type()) == types.KindBytes || types.KindForFieldType(r.Type()) == types.KindBytes {
		return nil
	}
	a, ca := collationOf(l)
	b, cb := collationOf(r)
	switch {
	case ca < cb:
		return a
	case cb < ca:
		return b
	case a == nil || b == nil:
		return nil
	}
	return a
}

// compareColl is compareDatums under a collation (nil: compareDatums).
func compareColl(l, r types.Datum, coll *collate.Collation) (int, error) {
	if coll != nil && l.Kind() == types.KindString && r.Kind() == types.KindString {
		return coll.Compare(l.Bytes(), r.Bytes()), nil
	}
	return compareDatums(l, r)
}
