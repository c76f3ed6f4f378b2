package server

import (
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	pmysql "github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// bindParams converts the values a client bound in COM_STMT_EXECUTE (or
// streamed with COM_STMT_SEND_LONG_DATA) into Datums, in parameter order.
//
// vitess decodes the binary values already but flattens their types: every
// string-like value (text, blob, decimal) arrives as VARBINARY and dates as
// loosely formatted text. The type the client declared for each parameter
// is still in prepare.ParamsType, and it decides the Datum kind here.
func bindParams(prepare *mysql.PrepareData, count int) ([]types.Datum, error) {
	if count == 0 {
		return nil, nil
	}
	params := make([]types.Datum, count)
	for i := 0; i < count; i++ {
		bv := prepare.BindVars[bindVarName(i)]
		if bv == nil {
			return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to mysqld_stmt_execute: parameter %d was not bound", i+1)
		}
		declared := bv.Type
		if i < len(prepare.ParamsType) && prepare.ParamsType[i] != 0 {
			declared = querypb.Type(prepare.ParamsType[i])
		}
		d, err := bindValue(bv, declared)
		if err != nil {
			return nil, err
		}
		params[i] = d
	}
	return params, nil
}

// bindVarNames caches the names vitess gives the first parameters
// ("v1", "v2", ...), sparing an allocation per parameter per execute.
var bindVarNames = func() [64]string {
	var names [64]string
	for i := range names {
		names[i] = "v" + strconv.Itoa(i+1)
	}
	return names
}()

func bindVarName(i int) string {
	if i < len(bindVarNames) {
		return bindVarNames[i]
	}
	return "v" + strconv.Itoa(i+1)
}

// bindValue converts one bound value. decoded is how vitess decoded it
// (bv.Type), declared is the MySQL type the client sent for the parameter.
func bindValue(bv *querypb.BindVariable, declared querypb.Type) (types.Datum, error) {
	raw := bv.Value
	switch bv.Type {
	case sqltypes.Null:
		return types.Null, nil
	case sqltypes.Int64:
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return types.Null, badParam(raw, err)
		}
		return types.NewInt(v), nil
	case sqltypes.Uint64:
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return types.Null, badParam(raw, err)
		}
		return types.NewUint(v), nil
	case sqltypes.Float64:
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return types.Null, badParam(raw, err)
		}
		return types.NewFloat(v), nil
	}
	switch declared {
	case sqltypes.Null:
		return types.Null, nil
	case sqltypes.Date, sqltypes.Datetime, sqltypes.Timestamp:
		return bindDateTime(string(raw), declared)
	case sqltypes.Time:
		return types.NewString(normalizeDuration(string(raw))), nil
	case sqltypes.Decimal:
		dec, err := types.ParseDecimal(string(raw))
		if err != nil {
			return types.Null, sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect DECIMAL value: '%s'", raw)
		}
		return types.NewDecimal(dec), nil
	case sqltypes.Text, sqltypes.Blob, sqltypes.Binary, sqltypes.VarBinary, sqltypes.Bit, sqltypes.Geometry:
		// The BLOB type codes (vitess maps them to TEXT: the parameter
		// flags carry no binary bit) bind binary strings, as in MySQL.
		return types.NewBytes(raw), nil
	default: // CHAR, VARCHAR (what drivers send for strings), ENUM, SET, JSON
		return types.NewStringBytes(raw), nil
	}
}

func badParam(raw []byte, err error) error {
	return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to mysqld_stmt_execute: %q: %v", raw, err)
}

// bindDateTime rebuilds a DATE/DATETIME/TIMESTAMP parameter from the text
// vitess made of its binary form: "Y-M-D", "Y-M-D h:m:s" or
// "Y-M-D h:m:s.micro" with unpadded fields (so ".5000" means 5000
// microseconds, not half a second), or " " for the all-zero value.
func bindDateTime(s string, declared querypb.Type) (types.Datum, error) {
	tp := pmysql.TypeDatetime
	switch declared {
	case sqltypes.Date:
		tp = pmysql.TypeDate
	case sqltypes.Timestamp:
		tp = pmysql.TypeTimestamp
	}
	s = strings.TrimSpace(s)
	if s == "" {
		t, err := types.NewTimeFromParts(0, 0, 0, 0, 0, 0, 0, tp, 0)
		if err != nil {
			return types.Null, err
		}
		return types.NewTime(t), nil
	}
	var parts [7]int
	date, clock, hasClock := strings.Cut(s, " ")
	fields := strings.Split(date, "-")
	if hasClock {
		hms, micro, hasMicro := strings.Cut(clock, ".")
		fields = append(fields, strings.Split(hms, ":")...)
		if hasMicro {
			fields = append(fields, micro)
		}
	}
	if len(fields) != 3 && len(fields) != 6 && len(fields) != 7 {
		return types.Null, sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect datetime value: '%s'", s)
	}
	for i, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return types.Null, sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect datetime value: '%s'", s)
		}
		parts[i] = v
	}
	fsp := 0
	if len(fields) == 7 {
		fsp = 6
	}
	if tp == pmysql.TypeDate {
		fsp = 0
		parts[3], parts[4], parts[5], parts[6] = 0, 0, 0, 0
	}
	t, err := types.NewTimeFromParts(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6], tp, fsp)
	if err != nil {
		return types.Null, err
	}
	return types.NewTime(t), nil
}

// normalizeDuration rewrites vitess's "h:m:s.micro" rendering of a TIME
// parameter (unpadded microseconds) as MySQL text "h:mm:ss.ffffff".
func normalizeDuration(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	hms, micro, hasMicro := strings.Cut(s, ".")
	f := strings.Split(hms, ":")
	if len(f) != 3 {
		return s
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(f[0])
	for _, p := range f[1:] {
		b.WriteByte(':')
		if len(p) < 2 {
			b.WriteByte('0')
		}
		b.WriteString(p)
	}
	if hasMicro {
		m, err := strconv.Atoi(micro)
		if err == nil && m > 0 {
			b.WriteByte('.')
			ms := strconv.Itoa(m)
			b.WriteString(strings.Repeat("0", 6-len(ms)))
			b.WriteString(ms)
		}
	}
	return b.String()
}
