package expr

import (
	"encoding/json"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/sqljson"
	"github.com/strata-db/strata/internal/sql/types"
)

// JSON functions (MySQL 8): values travel between them as canonical JSON
// text typed JSON (package sqljson does the work); `doc->'$.p'` is
// JSON_EXTRACT and `doc->>'$.p'` JSON_UNQUOTE(JSON_EXTRACT(...)), as the
// parser rewrites them.

func jsonType() *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeJSON)
	ft.SetCharset(mysql.DefaultCharset)
	ft.SetCollate("utf8mb4_bin")
	ft.SetFlen(mysql.MaxBlobWidth)
	return ft
}

func retJSON([]Expr) *ptypes.FieldType { return jsonType() }

func retLongText([]Expr) *ptypes.FieldType {
	ft := stringType(mysql.MaxBlobWidth)
	ft.SetType(mysql.TypeLongBlob)
	return ft
}

func isJSONExpr(e Expr) bool { return e.Type().GetType() == mysql.TypeJSON }

func init() {
	for name, def := range map[string]*funcDef{
		"json_extract":       {minArgs: 2, maxArgs: -1, nullIfNullArg: true, retType: retJSON, eval: evalJSONExtract},
		"json_unquote":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retLongText, eval: evalJSONUnquote},
		"json_quote":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retLongText, eval: evalJSONQuote},
		"json_object":        {minArgs: 0, maxArgs: -1, retType: retJSON, eval: evalJSONObject},
		"json_array":         {minArgs: 0, maxArgs: -1, retType: retJSON, eval: evalJSONArray},
		"json_contains":      {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retIntFn, eval: evalJSONContains},
		"json_contains_path": {minArgs: 3, maxArgs: -1, nullIfNullArg: true, retType: retIntFn, eval: evalJSONContainsPath},
		"json_set":           {minArgs: 3, maxArgs: -1, retType: retJSON, eval: evalJSONSet(sqljson.SetAny, "json_set")},
		"json_insert":        {minArgs: 3, maxArgs: -1, retType: retJSON, eval: evalJSONSet(sqljson.SetInsert, "json_insert")},
		"json_replace":       {minArgs: 3, maxArgs: -1, retType: retJSON, eval: evalJSONSet(sqljson.SetReplace, "json_replace")},
		"json_remove":        {minArgs: 2, maxArgs: -1, nullIfNullArg: true, retType: retJSON, eval: evalJSONRemove},
		"json_keys":          {minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retJSON, eval: evalJSONKeys},
		"json_length":        {minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retIntFn, eval: evalJSONLength},
		"json_valid":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retIntFn, eval: evalJSONValid},
		"json_type":          {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retVarchar, eval: evalJSONType},
		"json_depth":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retIntFn, eval: evalJSONDepth},
	} {
		builtins[name] = def
	}
}

func retIntFn([]Expr) *ptypes.FieldType { return intType(21, false) }

func retVarchar([]Expr) *ptypes.FieldType { return stringType(64) }

func jsonDatum(v any) types.Datum { return types.NewStringBytes(sqljson.Append(nil, v)) }

// jsonDoc parses argument i of f as a JSON document (error 3141 if it is
// not one).
func jsonDoc(f *Func, i int, d types.Datum) (any, error) {
	var b []byte
	if d.IsStringLike() {
		b = d.Bytes()
	} else {
		b = d.AppendText(nil)
	}
	v, err := sqljson.Parse(b)
	if err != nil {
		return nil, sqlerr.New(3141, "22032", "Invalid JSON text in argument %d to function %s: \"Invalid value.\" at position 0.", i+1, f.Name)
	}
	return v, nil
}

// jsonValue converts argument i of f to a JSON value: a JSON-typed
// argument is parsed, text becomes a JSON string, numbers JSON numbers,
// NULL JSON null.
func jsonValue(f *Func, i int, d types.Datum) (any, error) {
	if d.IsNull() {
		return nil, nil
	}
	if isJSONExpr(f.Args[i]) {
		return jsonDoc(f, i, d)
	}
	return sqlToJSON(d), nil
}

func sqlToJSON(d types.Datum) any {
	switch d.Kind() {
	case types.KindNull:
		return nil
	case types.KindInt64, types.KindUint64, types.KindDecimal:
		return json.Number(d.AppendText(nil))
	case types.KindFloat64:
		return json.Number(sqljson.AppendFloat(nil, d.Float()))
	}
	return string(d.AppendText(nil))
}

func jsonPath(f *Func, d types.Datum) (*sqljson.Path, error) {
	s, _ := d.ToString()
	p, err := sqljson.ParsePath(s)
	if err != nil {
		return nil, sqlerr.New(3143, "42000", "Invalid JSON path expression. The error is around character position 0 in '%s'.", s)
	}
	return p, nil
}

func evalJSONExtract(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	doc, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	var matches []any
	wrap := len(args) > 2
	for _, a := range args[1:] {
		p, err := jsonPath(f, a)
		if err != nil {
			return types.Datum{}, err
		}
		wrap = wrap || p.HasWildcard()
		matches = append(matches, sqljson.Extract(doc, p)...)
	}
	switch {
	case len(matches) == 0:
		return types.Datum{}, nil
	case !wrap:
		return jsonDatum(matches[0]), nil
	}
	return jsonDatum(matches), nil
}

func evalJSONUnquote(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	b := args[0].Bytes()
	if !args[0].IsStringLike() {
		b = args[0].AppendText(nil)
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return types.Datum{}, sqlerr.New(3141, "22032", "Invalid JSON text in argument 1 to function json_unquote: \"Invalid value.\" at position 0.")
		}
		return types.NewString(s), nil
	}
	return types.NewStringBytes(b), nil
}

func evalJSONQuote(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	s, _ := args[0].ToString()
	return types.NewStringBytes(sqljson.AppendString(nil, s)), nil
}

func evalJSONObject(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if len(args)%2 != 0 {
		return types.Datum{}, errArgCount("JSON_OBJECT")
	}
	o := sqljson.Object{}
	for i := 0; i < len(args); i += 2 {
		if args[i].IsNull() {
			return types.Datum{}, sqlerr.New(3158, "22032", "JSON documents may not contain NULL member names.")
		}
		k, _ := args[i].ToString()
		v, err := jsonValue(f, i+1, args[i+1])
		if err != nil {
			return types.Datum{}, err
		}
		o[k] = v
	}
	return jsonDatum(o), nil
}

func evalJSONArray(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	a := make([]any, len(args))
	for i, d := range args {
		v, err := jsonValue(f, i, d)
		if err != nil {
			return types.Datum{}, err
		}
		a[i] = v
	}
	return jsonDatum(a), nil
}

func evalJSONContains(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	target, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	cand, err := jsonDoc(f, 1, args[1])
	if err != nil {
		return types.Datum{}, err
	}
	if len(args) == 3 {
		p, err := jsonPath(f, args[2])
		if err != nil {
			return types.Datum{}, err
		}
		m := sqljson.Extract(target, p)
		if len(m) == 0 {
			return types.Datum{}, nil
		}
		target = m[0]
	}
	return types.NewBool(sqljson.Contains(target, cand)), nil
}

func evalJSONContainsPath(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	doc, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	mode, _ := args[1].ToString()
	all := strings.EqualFold(mode, "all")
	if !all && !strings.EqualFold(mode, "one") {
		return types.Datum{}, sqlerr.New(3154, "42000", "The oneOrAll argument to json_contains_path may take these values: 'one' or 'all'.")
	}
	for _, a := range args[2:] {
		p, err := jsonPath(f, a)
		if err != nil {
			return types.Datum{}, err
		}
		found := len(sqljson.Extract(doc, p)) > 0
		if found && !all {
			return types.NewBool(true), nil
		}
		if !found && all {
			return types.NewBool(false), nil
		}
	}
	return types.NewBool(all), nil
}

func evalJSONSet(mode sqljson.SetMode, name string) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		if len(args)%2 != 1 {
			return types.Datum{}, errArgCount(strings.ToUpper(name))
		}
		if args[0].IsNull() {
			return types.Datum{}, nil
		}
		doc, err := jsonDoc(f, 0, args[0])
		if err != nil {
			return types.Datum{}, err
		}
		for i := 1; i < len(args); i += 2 {
			if args[i].IsNull() {
				return types.Datum{}, nil
			}
			p, err := jsonPath(f, args[i])
			if err != nil {
				return types.Datum{}, err
			}
			if p.HasWildcard() {
				return types.Datum{}, sqlerr.New(3149, "42000", "In this situation, path expressions may not contain the * and ** tokens.")
			}
			v, err := jsonValue(f, i+1, args[i+1])
			if err != nil {
				return types.Datum{}, err
			}
			doc = sqljson.Set(doc, p, v, mode)
		}
		return jsonDatum(doc), nil
	}
}

func evalJSONRemove(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	doc, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	for _, a := range args[1:] {
		p, err := jsonPath(f, a)
		if err != nil {
			return types.Datum{}, err
		}
		if p.HasWildcard() || p.IsRoot() {
			return types.Datum{}, sqlerr.New(3149, "42000", "In this situation, path expressions may not contain the * and ** tokens.")
		}
		doc = sqljson.Remove(doc, p)
	}
	return jsonDatum(doc), nil
}

// docAt is the document of args[0], or its value at the path args[1]
// (ok=false when the path matches nothing).
func docAt(f *Func, args []types.Datum) (v any, ok bool, err error) {
	doc, err := jsonDoc(f, 0, args[0])
	if err != nil || len(args) < 2 {
		return doc, err == nil, err
	}
	p, err := jsonPath(f, args[1])
	if err != nil {
		return nil, false, err
	}
	m := sqljson.Extract(doc, p)
	if len(m) == 0 {
		return nil, false, nil
	}
	return m[0], true, nil
}

func evalJSONKeys(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	v, ok, err := docAt(f, args)
	if err != nil || !ok {
		return types.Datum{}, err
	}
	o, isObj := v.(sqljson.Object)
	if !isObj {
		return types.Datum{}, nil
	}
	keys := sqljson.SortedKeys(o)
	a := make([]any, len(keys))
	for i, k := range keys {
		a[i] = k
	}
	return jsonDatum(a), nil
}

func evalJSONLength(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	v, ok, err := docAt(f, args)
	if err != nil || !ok {
		return types.Datum{}, err
	}
	return types.NewInt(int64(sqljson.Length(v))), nil
}

func evalJSONValid(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if isJSONExpr(f.Args[0]) {
		return types.NewBool(true), nil
	}
	if !args[0].IsStringLike() {
		return types.NewBool(false), nil
	}
	_, err := sqljson.Parse(args[0].Bytes())
	return types.NewBool(err == nil), nil
}

func evalJSONType(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	v, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	return types.NewString(sqljson.TypeName(v)), nil
}

func evalJSONDepth(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	v, err := jsonDoc(f, 0, args[0])
	if err != nil {
		return types.Datum{}, err
	}
	return types.NewInt(int64(depth(v))), nil
}

func depth(v any) int {
	d := 0
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			d = max(d, depth(e))
		}
	case sqljson.Object:
		for _, e := range t {
			d = max(d, depth(e))
		}
	default:
		return 1
	}
	return d + 1
}

// jsonCompare compares two operands of which at least one is JSON-typed,
// as MySQL does: the other side is converted to a JSON value (text to a
// JSON string), then JSON values are ordered (sqljson.Compare).
func jsonCompare(lt, rt Expr, l, r types.Datum) (int, error) {
	conv := func(e Expr, d types.Datum) (any, error) {
		if isJSONExpr(e) {
			b := d.Bytes()
			if !d.IsStringLike() {
				b = d.AppendText(nil)
			}
			v, err := sqljson.Parse(b)
			if err != nil {
				return nil, sqlerr.New(3141, "22032", "Invalid JSON text: \"Invalid value.\" at position 0.")
			}
			return v, nil
		}
		return sqlToJSON(d), nil
	}
	a, err := conv(lt, l)
	if err != nil {
		return 0, err
	}
	b, err := conv(rt, r)
	if err != nil {
		return 0, err
	}
	return sqljson.Compare(a, b), nil
}
