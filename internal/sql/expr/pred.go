package expr

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// CmpOp is a comparison operator.
type CmpOp uint8

// Comparison operators.
const (
	CmpEQ CmpOp = iota
	CmpNE
	CmpLT
	CmpLE
	CmpGT
	CmpGE
	CmpNullEQ // <=>: NULL-safe equality, never NULL
)

var cmpOpText = [...]string{"=", "<>", "<", "<=", ">", ">=", "<=>"}

// Comparison is L op R with MySQL's type conversions (types.Compare).
type Comparison struct {
	Op   CmpOp
	L, R Expr
	coll *collate.Collation // text vs text (nil: byte-wise)
	json bool               // an operand is JSON: compare JSON values
}

// NewComparison builds L op R. A string constant compared with a temporal
// operand is parsed once here rather than on every row.
func NewComparison(op CmpOp, l, r Expr) Expr {
	l, r = prepareTemporalConstant(l, r), prepareTemporalConstant(r, l)
	if isNumericClass(classOf(r.Type())) {
		l = numericContext(l)
	}
	if isNumericClass(classOf(l.Type())) {
		r = numericContext(r)
	}
	return &Comparison{Op: op, L: l, R: r, coll: PairCollation(l, r), json: isJSONExpr(l) || isJSONExpr(r)}
}

// prepareTemporalConstant returns c converted to a time when other is
// temporal and c is a string constant holding a valid date/datetime.
func prepareTemporalConstant(c, other Expr) Expr {
	k, ok := c.(*Constant)
	if !ok || classOf(other.Type()) != classTime {
		return c
	}
	if k.Value.Kind() != types.KindString && k.Value.Kind() != types.KindBytes {
		return c
	}
	// DATETIME even against a DATE: '2020-01-01 10:00' must not equal DATE '2020-01-01'.
	t, err := types.ParseTime(string(k.Value.Bytes()), mysql.TypeDatetime, types.MaxFsp)
	if err != nil {
		return c
	}
	d := types.NewTime(t)
	return NewConstant(d, nil)
}

// Type implements Expr.
func (c *Comparison) Type() *ptypes.FieldType { return boolType() }

func (c *Comparison) String() string {
	return "(" + c.L.String() + " " + cmpOpText[c.Op] + " " + c.R.String() + ")"
}

// compareDatums is types.Compare with an allocation-free fast path for the
// common integer case.
func compareDatums(l, r types.Datum) (int, error) {
	if l.Kind() == types.KindInt64 && r.Kind() == types.KindInt64 {
		x, y := l.Int(), r.Int()
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	return types.Compare(l, r)
}

// Eval implements Expr.
func (c *Comparison) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	l, err := c.L.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	r, err := c.R.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	return c.apply(l, r)
}

// apply compares the operands' values.
func (c *Comparison) apply(l, r types.Datum) (types.Datum, error) {
	if c.Op == CmpNullEQ {
		if l.IsNull() || r.IsNull() {
			return types.NewBool(l.IsNull() && r.IsNull()), nil
		}
	} else if l.IsNull() || r.IsNull() {
		return types.Datum{}, nil
	}
	var (
		cmp int
		err error
	)
	if c.json {
		cmp, err = jsonCompare(c.L, c.R, l, r)
	} else {
		cmp, err = compareColl(l, r, c.coll)
	}
	if err != nil {
		return types.Datum{}, err
	}
	return types.NewBool(cmpResult(c.Op, cmp)), nil
}

func cmpResult(op CmpOp, cmp int) bool {
	switch op {
	case CmpEQ, CmpNullEQ:
		return cmp == 0
	case CmpNE:
		return cmp != 0
	case CmpLT:
		return cmp < 0
	case CmpLE:
		return cmp <= 0
	case CmpGT:
		return cmp > 0
	}
	return cmp >= 0
}

// truth evaluates e as a condition: (true, false), (false, false) or
// (_, true) for unknown.
func truth(ctx *EvalContext, e Expr, row []types.Datum) (isTrue, isNull bool, err error) {
	d, err := e.Eval(ctx, row)
	if err != nil {
		return false, false, err
	}
	isTrue, isNull = truthOf(ctx, d)
	return isTrue, isNull, nil
}

// truthOf is a value's truth as a condition; a value that does not
// convert cleanly warns.
func truthOf(ctx *EvalContext, d types.Datum) (isTrue, isNull bool) {
	switch d.Kind() {
	case types.KindInt64, types.KindUint64:
		return d.Int() != 0, false
	case types.KindNull:
		return false, true
	}
	t, n, werr := d.ToBool()
	ctx.Warn(werr)
	return t, n
}

// LogicOp is AND, OR or XOR.
type LogicOp uint8

// Logical operators.
const (
	LogicAnd LogicOp = iota
	LogicOr
	LogicXor
)

// Logic is a three-valued AND, OR or XOR.
type Logic struct {
	Op   LogicOp
	L, R Expr
}

// NewLogic builds L op R.
func NewLogic(op LogicOp, l, r Expr) Expr { return &Logic{Op: op, L: l, R: r} }

// Type implements Expr.
func (g *Logic) Type() *ptypes.FieldType { return boolType() }

func (g *Logic) String() string {
	return "(" + g.L.String() + " " + [...]string{"AND", "OR", "XOR"}[g.Op] + " " + g.R.String() + ")"
}

// Eval implements Expr: AND is false if either side is false, else NULL if
// either is NULL; OR is true if either is true, else NULL if either is NULL;
// XOR is NULL if either is NULL.
func (g *Logic) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	lt, ln, err := truth(ctx, g.L, row)
	if err != nil {
		return types.Datum{}, err
	}
	if d, done := g.short(lt, ln); done {
		return d, nil
	}
	rt, rn, err := truth(ctx, g.R, row)
	if err != nil {
		return types.Datum{}, err
	}
	return g.combine(lt, ln, rt, rn), nil
}

// short is the result when the left operand's truth decides it (done);
// otherwise the right operand is evaluated.
func (g *Logic) short(lt, ln bool) (d types.Datum, done bool) {
	switch g.Op {
	case LogicAnd:
		if !lt && !ln {
			return types.NewBool(false), true
		}
	case LogicOr:
		if lt {
			return types.NewBool(true), true
		}
	case LogicXor:
		if ln {
			return types.Datum{}, true
		}
	}
	return types.Datum{}, false
}

// combine is the result from both operands' truth, when short did not
// decide it.
func (g *Logic) combine(lt, ln, rt, rn bool) types.Datum {
	switch g.Op {
	case LogicAnd:
		if !rt && !rn {
			return types.NewBool(false)
		}
		if ln || rn {
			return types.Datum{}
		}
		return types.NewBool(true)
	case LogicOr:
		if rt {
			return types.NewBool(true)
		}
		if ln || rn {
			return types.Datum{}
		}
		return types.NewBool(false)
	}
	if rn {
		return types.Datum{}
	}
	return types.NewBool(lt != rt)
}

// Not is three-valued NOT.
type Not struct{ E Expr }

// Type implements Expr.
func (n *Not) Type() *ptypes.FieldType { return boolType() }

func (n *Not) String() string { return "(NOT " + n.E.String() + ")" }

// Eval implements Expr.
func (n *Not) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	t, isNull, err := truth(ctx, n.E, row)
	if err != nil || isNull {
		return types.Datum{}, err
	}
	return types.NewBool(!t), nil
}

// IsNull is e IS [NOT] NULL.
type IsNull struct {
	E   Expr
	Not bool
}

// Type implements Expr.
func (n *IsNull) Type() *ptypes.FieldType { return boolType() }

func (n *IsNull) String() string {
	if n.Not {
		return "(" + n.E.String() + " IS NOT NULL)"
	}
	return "(" + n.E.String() + " IS NULL)"
}

// Eval implements Expr.
func (n *IsNull) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	d, err := n.E.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	return types.NewBool(d.IsNull() != n.Not), nil
}

// IsTruth is e IS [NOT] TRUE / FALSE; never NULL.
type IsTruth struct {
	E     Expr
	Not   bool
	Truth bool // IS TRUE when true, IS FALSE when false
}

// Type implements Expr.
func (n *IsTruth) Type() *ptypes.FieldType { return boolType() }

func (n *IsTruth) String() string {
	s := "(" + n.E.String() + " IS "
	if n.Not {
		s += "NOT "
	}
	if n.Truth {
		return s + "TRUE)"
	}
	return s + "FALSE)"
}

// Eval implements Expr.
func (n *IsTruth) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	t, isNull, err := truth(ctx, n.E, row)
	if err != nil {
		return types.Datum{}, err
	}
	res := !isNull && t == n.Truth
	return types.NewBool(res != n.Not), nil
}

// Between is e [NOT] BETWEEN lo AND hi, i.e. e >= lo AND e <= hi.
type Between struct {
	E, Lo, Hi Expr
	Not       bool
	cLo, cHi  *collate.Collation
}

// NewBetween builds e [NOT] BETWEEN lo AND hi.
func NewBetween(e, lo, hi Expr, not bool) Expr {
	b := &Between{E: e, Lo: prepareTemporalConstant(lo, e), Hi: prepareTemporalConstant(hi, e), Not: not}
	b.cLo, b.cHi = PairCollation(e, b.Lo), PairCollation(e, b.Hi)
	return b
}

// Type implements Expr.
func (b *Between) Type() *ptypes.FieldType { return boolType() }

func (b *Between) String() string {
	not := ""
	if b.Not {
		not = "NOT "
	}
	return "(" + b.E.String() + " " + not + "BETWEEN " + b.Lo.String() + " AND " + b.Hi.String() + ")"
}

// Eval implements Expr.
func (b *Between) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	v, err := b.E.Eval(ctx, row)
	if err != nil || v.IsNull() {
		return types.Datum{}, err
	}
	lo, err := b.Lo.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	hi, err := b.Hi.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	// Each bound is a three-valued comparison: 1 true, 0 false, -1 unknown.
	geLo, leHi := -1, -1
	if !lo.IsNull() {
		c, err := compareColl(v, lo, b.cLo)
		if err != nil {
			return types.Datum{}, err
		}
		geLo = boolInt(c >= 0)
	}
	if !hi.IsNull() {
		c, err := compareColl(v, hi, b.cHi)
		if err != nil {
			return types.Datum{}, err
		}
		leHi = boolInt(c <= 0)
	}
	var res int // AND of the two
	switch {
	case geLo == 0 || leHi == 0:
		res = 0
	case geLo == -1 || leHi == -1:
		return types.Datum{}, nil
	default:
		res = 1
	}
	return types.NewBool((res == 1) != b.Not), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// In is e [NOT] IN (list). When the list is all non-NULL numeric constants
// (or all string constants), membership of a numeric (string) value is a
// hash lookup; other combinations compare item by item.
type In struct {
	E       Expr
	List    []Expr
	Not     bool
	numeric map[string]struct{} // hash keys of the numeric constant list, or nil
	strs    map[string]struct{} // bytes (collation keys under coll) of the string constant list, or nil
	coll    *collate.Collation  // of e and the items when all are text (nil: byte-wise)
}

// NewIn builds e [NOT] IN (list).
func NewIn(e Expr, list []Expr, not bool) Expr {
	in := &In{E: e, Not: not}
	allNumeric, allStrings := len(list) > 4, len(list) > 4
	for i, item := range list {
		item = prepareTemporalConstant(item, e)
		in.List = append(in.List, item)
		if c := PairCollation(e, item); i == 0 || c != in.coll {
			if i > 0 {
				allStrings = false
			}
			in.coll = c
		}
		k, ok := item.(*Constant)
		if !ok || !k.Value.IsNumeric() {
			allNumeric = false
		}
		if !ok || !k.Value.IsStringLike() {
			allStrings = false
		}
	}
	switch {
	case allNumeric:
		in.numeric = make(map[string]struct{}, len(list))
		for _, item := range in.List {
			in.numeric[string(item.(*Constant).Value.AppendHashKey(nil))] = struct{}{}
		}
	case allStrings:
		// Equality is byte equality of the collation keys (of the bytes
		// when binary).
		in.strs = make(map[string]struct{}, len(list))
		for _, item := range in.List {
			in.strs[string(in.stringKey(nil, item.(*Constant).Value))] = struct{}{}
		}
	}
	return in
}

// Type implements Expr.
func (in *In) Type() *ptypes.FieldType { return boolType() }

func (in *In) String() string {
	var sb strings.Builder
	sb.WriteString("(" + in.E.String())
	if in.Not {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" IN (")
	for i, item := range in.List {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(item.String())
	}
	sb.WriteString("))")
	return sb.String()
}

// Eval implements Expr: true if e equals an item; otherwise NULL if e or
// any item is NULL; otherwise false.
func (in *In) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	v, err := in.E.Eval(ctx, row)
	if err != nil || v.IsNull() {
		return types.Datum{}, err
	}
	if in.numeric != nil && v.IsNumeric() {
		var buf [48]byte
		_, found := in.numeric[string(v.AppendHashKey(buf[:0]))]
		return types.NewBool(found != in.Not), nil
	}
	if in.strs != nil && v.IsStringLike() {
		var buf [64]byte
		_, found := in.strs[string(in.stringKey(buf[:0], v))]
		return types.NewBool(found != in.Not), nil
	}
	sawNull := false
	for _, item := range in.List {
		d, err := item.Eval(ctx, row)
		if err != nil {
			return types.Datum{}, err
		}
		if d.IsNull() {
			sawNull = true
			continue
		}
		c, err := compareColl(v, d, in.coll)
		if err != nil {
			return types.Datum{}, err
		}
		if c == 0 {
			return types.NewBool(!in.Not), nil
		}
	}
	if sawNull {
		return types.Datum{}, nil
	}
	return types.NewBool(in.Not), nil
}

// stringKey is the key of a text or binary value in in.strs.
func (in *In) stringKey(buf []byte, d types.Datum) []byte {
	if in.coll != nil && d.Kind() == types.KindString {
		return in.coll.Key(buf, d.Bytes())
	}
	return append(buf, d.Bytes()...)
}

// Like is e [NOT] LIKE pattern [ESCAPE c]: % matches any sequence, _ one
// character; comparison is byte-wise per character (binary collation).
type Like struct {
	E, Pattern Expr
	Escape     rune
	Not        bool
	compiled   []likeToken        // set when Pattern is constant
	coll       *collate.Collation // characters compare under it (nil: code points)
}

// NewLike builds e [NOT] LIKE pattern ESCAPE escape.
func NewLike(e, pattern Expr, escape rune, not bool) Expr {
	l := &Like{E: e, Pattern: pattern, Escape: escape, Not: not, coll: PairCollation(e, pattern)}
	if k, ok := pattern.(*Constant); ok && !k.Value.IsNull() {
		s, _ := k.Value.ToString()
		l.compiled = compileLike(s, escape)
	}
	return l
}

// Type implements Expr.
func (l *Like) Type() *ptypes.FieldType { return boolType() }

func (l *Like) String() string {
	not := ""
	if l.Not {
		not = "NOT "
	}
	return "(" + l.E.String() + " " + not + "LIKE " + l.Pattern.String() + ")"
}

// Eval implements Expr.
func (l *Like) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	v, err := l.E.Eval(ctx, row)
	if err != nil || v.IsNull() {
		return types.Datum{}, err
	}
	tokens := l.compiled
	if tokens == nil {
		p, err := l.Pattern.Eval(ctx, row)
		if err != nil || p.IsNull() {
			return types.Datum{}, err
		}
		ps, _ := p.ToString()
		tokens = compileLike(ps, l.Escape)
	}
	var s []byte
	if v.IsStringLike() {
		s = v.Bytes()
	} else {
		s = v.AppendText(nil)
	}
	if v.Kind() != types.KindString {
		return types.NewBool(matchLike(tokens, s, nil) != l.Not), nil
	}
	return types.NewBool(matchLike(tokens, s, l.coll) != l.Not), nil
}

type likeKind uint8

const (
	likeLiteral likeKind = iota // one character
	likeOne                     // _
	likeAny                     // %
)

type likeToken struct {
	kind likeKind
	r    rune
}

func compileLike(p string, escape rune) []likeToken {
	tokens := make([]likeToken, 0, len(p)+1)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		i += size
		switch {
		case r == escape && i < len(p):
			r, size = utf8.DecodeRuneInString(p[i:])
			i += size
			tokens = append(tokens, likeToken{kind: likeLiteral, r: r})
		case r == '%':
			if n := len(tokens); n == 0 || tokens[n-1].kind != likeAny {
				tokens = append(tokens, likeToken{kind: likeAny})
			}
		case r == '_':
			tokens = append(tokens, likeToken{kind: likeOne})
		default:
			tokens = append(tokens, likeToken{kind: likeLiteral, r: r})
		}
	}
	// A non-nil empty slice marks "compiled" for the empty pattern too.
	return tokens
}

// matchLike is the classic wildcard match with backtracking to the last %:
// linear for patterns with one %, O(n*m) worst case.
func matchLike(tokens []likeToken, s []byte, coll *collate.Collation) bool {
	ti, si := 0, 0
	starTi, starSi := -1, 0
	for si < len(s) {
		if ti < len(tokens) {
			t := tokens[ti]
			switch t.kind {
			case likeAny:
				starTi, starSi = ti, si
				ti++
				continue
			case likeOne:
				_, size := utf8.DecodeRune(s[si:])
				si += size
				ti++
				continue
			case likeLiteral:
				r, size := utf8.DecodeRune(s[si:])
				if r == t.r || (coll != nil && coll.RuneEqual(r, t.r)) {
					si += size
					ti++
					continue
				}
			}
		}
		if starTi < 0 {
			return false
		}
		_, size := utf8.DecodeRune(s[starSi:])
		starSi += size
		si = starSi
		ti = starTi + 1
	}
	for ti < len(tokens) && tokens[ti].kind == likeAny {
		ti++
	}
	return ti == len(tokens)
}

// Regexp is e [NOT] REGEXP pattern (Go RE2 syntax, which covers MySQL's
// common patterns).
type Regexp struct {
	E, Pattern Expr
	Not        bool
	compiled   *regexp.Regexp
}

// NewRegexp builds e [NOT] REGEXP pattern; a constant pattern compiles once.
func NewRegexp(e, pattern Expr, not bool) (Expr, error) {
	r := &Regexp{E: e, Pattern: pattern, Not: not}
	if k, ok := pattern.(*Constant); ok && !k.Value.IsNull() {
		s, _ := k.Value.ToString()
		re, err := compileRegexp(s)
		if err != nil {
			return nil, err
		}
		r.compiled = re
	}
	return r, nil
}

func compileRegexp(s string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, sqlerr.New(3692, "HY000", "Illegal argument to a regular expression.")
	}
	return re, nil
}

// Type implements Expr.
func (r *Regexp) Type() *ptypes.FieldType { return boolType() }

func (r *Regexp) String() string {
	not := ""
	if r.Not {
		not = "NOT "
	}
	return "(" + r.E.String() + " " + not + "REGEXP " + r.Pattern.String() + ")"
}

// Eval implements Expr.
func (r *Regexp) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	v, err := r.E.Eval(ctx, row)
	if err != nil || v.IsNull() {
		return types.Datum{}, err
	}
	re := r.compiled
	if re == nil {
		p, err := r.Pattern.Eval(ctx, row)
		if err != nil || p.IsNull() {
			return types.Datum{}, err
		}
		ps, _ := p.ToString()
		if re, err = compileRegexp(ps); err != nil {
			return types.Datum{}, err
		}
	}
	s, _ := v.ToString()
	return types.NewBool(re.MatchString(s) != r.Not), nil
}
