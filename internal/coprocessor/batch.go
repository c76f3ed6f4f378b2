package coprocessor

import (
	"fmt"
	"math"

	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// BatchBuilder accumulates rows of a fixed width into the columns of a
// kvpb.CopBatch: per row and column one kind byte, and a word or bytes by
// kind (see kvpb.CopColumn).
type BatchBuilder struct {
	cols []*kvpb.CopColumn
	rows int
}

// NewBatchBuilder returns a builder of batches of width columns.
func NewBatchBuilder(width int) *BatchBuilder {
	b := &BatchBuilder{cols: make([]*kvpb.CopColumn, width)}
	for i := range b.cols {
		b.cols[i] = &kvpb.CopColumn{}
	}
	return b
}

// Rows is the number of rows appended so far.
func (b *BatchBuilder) Rows() int { return b.rows }

// Append adds one row; len(row) must be the builder's width.
func (b *BatchBuilder) Append(row []types.Datum) {
	for i, d := range row {
		appendDatum(b.cols[i], d)
	}
	b.rows++
}

// Build returns the batch of the rows appended. The builder must not be
// used after.
func (b *BatchBuilder) Build() *kvpb.CopBatch {
	return &kvpb.CopBatch{Rows: uint32(b.rows), Columns: b.cols}
}

func appendDatum(c *kvpb.CopColumn, d types.Datum) {
	c.Kinds = append(c.Kinds, byte(d.Kind()))
	switch d.Kind() {
	case types.KindNull:
	case types.KindInt64, types.KindUint64, types.KindFloat64, types.KindTime:
		c.Words = append(c.Words, datumWord(d))
	case types.KindDuration:
		c.Words = append(c.Words, d.DurationWord())
	case types.KindString, types.KindBytes:
		c.Data = append(c.Data, d.Bytes()...)
		c.Lens = append(c.Lens, uint32(len(d.Bytes())))
	case types.KindDecimal:
		n := len(c.Data)
		c.Data = d.Decimal().Append(c.Data)
		c.Lens = append(c.Lens, uint32(len(c.Data)-n))
	}
}

// datumWord is the integer word of an integer, float or time datum.
func datumWord(d types.Datum) int64 {
	switch d.Kind() {
	case types.KindInt64:
		return d.Int()
	case types.KindUint64:
		return int64(d.Uint())
	case types.KindFloat64:
		return int64(math.Float64bits(d.Float()))
	case types.KindTime:
		return int64(d.Time())
	}
	return 0
}

// DecodeBatch returns the rows of a batch. Strings share the batch's
// buffers (which the caller must then not reuse). extra zero datums are
// appended to every row.
func DecodeBatch(b *kvpb.CopBatch, extra int) ([][]types.Datum, error) {
	n := int(b.GetRows())
	width := len(b.GetColumns())
	if n == 0 {
		return nil, nil
	}
	slab := make([]types.Datum, n*(width+extra))
	rows := make([][]types.Datum, n)
	for i := range rows {
		rows[i] = slab[i*(width+extra) : (i+1)*(width+extra) : (i+1)*(width+extra)]
	}
	for j, c := range b.Columns {
		if len(c.Kinds) != n {
			return nil, fmt.Errorf("coprocessor: column %d of a batch has %d values for %d rows", j, len(c.Kinds), n)
		}
		w, l, off := 0, 0, 0
		for i, k := range c.Kinds {
			var d types.Datum
			switch types.Kind(k) {
			case types.KindNull:
			case types.KindInt64, types.KindUint64, types.KindFloat64, types.KindTime, types.KindDuration:
				if w >= len(c.Words) {
					return nil, errShort(j)
				}
				d = wordDatum(types.Kind(k), c.Words[w])
				w++
			case types.KindString, types.KindBytes, types.KindDecimal:
				if l >= len(c.Lens) || off+int(c.Lens[l]) > len(c.Data) {
					return nil, errShort(j)
				}
				v := c.Data[off : off+int(c.Lens[l]) : off+int(c.Lens[l])]
				off += int(c.Lens[l])
				l++
				switch types.Kind(k) {
				case types.KindString:
					d = types.NewStringBytes(v)
				case types.KindBytes:
					d = types.NewBytes(v)
				default:
					dec, err := types.ParseDecimal(string(v))
					if err != nil {
						return nil, fmt.Errorf("coprocessor: column %d: bad decimal %q", j, v)
					}
					d = types.NewDecimal(dec)
				}
			default:
				return nil, fmt.Errorf("coprocessor: column %d: unknown kind %d", j, k)
			}
			rows[i][j] = d
		}
	}
	return rows, nil
}

func errShort(col int) error {
	return fmt.Errorf("coprocessor: column %d of a batch is short", col)
}

func wordDatum(k types.Kind, w int64) types.Datum {
	switch k {
	case types.KindInt64:
		return types.NewInt(w)
	case types.KindUint64:
		return types.NewUint(uint64(w))
	case types.KindFloat64:
		return types.NewFloat(math.Float64frombits(uint64(w)))
	case types.KindTime:
		return types.NewTime(types.Time(w))
	case types.KindDuration:
		return types.NewDurationWord(w)
	}
	return types.Datum{}
}

// EncodeDatum returns d as a one-row, one-column batch (constants, column
// defaults).
func EncodeDatum(d types.Datum) *kvpb.CopBatch {
	b := NewBatchBuilder(1)
	b.Append([]types.Datum{d})
	return b.Build()
}

// DecodeDatum is the inverse of EncodeDatum; nil is NULL.
func DecodeDatum(b *kvpb.CopBatch) (types.Datum, error) {
	if b == nil {
		return types.Datum{}, nil
	}
	rows, err := DecodeBatch(b, 0)
	if err != nil {
		return types.Datum{}, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return types.Datum{}, fmt.Errorf("coprocessor: a value is not one datum")
	}
	return rows[0][0], nil
}

// FieldTypeToPB and FieldTypeFromPB carry a column or expression type.
func FieldTypeToPB(ft *ptypes.FieldType) *kvpb.CopFieldType {
	return &kvpb.CopFieldType{
		Tp: int32(ft.GetType()), Flag: uint32(ft.GetFlag()), Flen: int32(ft.GetFlen()), Decimal: int32(ft.GetDecimal()),
		Charset: ft.GetCharset(), Collate: ft.GetCollate(), Elems: ft.GetElems(),
	}
}

// FieldTypeFromPB is the inverse of FieldTypeToPB.
func FieldTypeFromPB(p *kvpb.CopFieldType) *ptypes.FieldType {
	ft := ptypes.NewFieldType(byte(p.GetTp()))
	ft.SetFlag(uint(p.GetFlag()))
	ft.SetFlen(int(p.GetFlen()))
	ft.SetDecimal(int(p.GetDecimal()))
	ft.SetCharset(p.GetCharset())
	ft.SetCollate(p.GetCollate())
	if len(p.GetElems()) > 0 {
		ft.SetElems(p.GetElems())
	}
	return ft
}
