package server

import (
	"testing"

	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/pingcap/tidb/pkg/parser/mysql"

	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/types"
)

func TestColumnDefinitions(t *testing.T) {
	cases := []struct {
		name     string
		col      *strsql.Column
		typ      querypb.Type
		charset  uint32
		length   uint32
		decimals uint32
		flags    uint
	}{
		{"int primary key", &strsql.Column{Type: ft(mysql.TypeLong, mysql.NotNullFlag|mysql.PriKeyFlag, 11, 0)},
			sqltypes.Int32, 63, 11, 0, mysql.NotNullFlag | mysql.PriKeyFlag | mysql.NumFlag | mysql.BinaryFlag},
		{"bigint unsigned", &strsql.Column{Type: ft(mysql.TypeLonglong, mysql.UnsignedFlag, 20, 0)},
			sqltypes.Uint64, 63, 20, 0, mysql.UnsignedFlag | mysql.NumFlag | mysql.BinaryFlag},
		{"varchar(120) utf8mb4_bin", &strsql.Column{Type: ft(mysql.TypeVarchar, 0, 120, 0)},
			sqltypes.VarChar, 46, 480, 0, 0},
		{"char(60) not null", &strsql.Column{Type: ft(mysql.TypeString, mysql.NotNullFlag, 60, 0)},
			sqltypes.Char, 46, 240, 0, mysql.NotNullFlag},
		{"varbinary", &strsql.Column{Type: ft(mysql.TypeVarchar, mysql.BinaryFlag, 16, 0)},
			sqltypes.VarBinary, 63, 16, 0, mysql.BinaryFlag},
		{"decimal(10,2)", &strsql.Column{Type: ft(mysql.TypeNewDecimal, 0, 10, 2)},
			sqltypes.Decimal, 63, 12, 2, mysql.NumFlag | mysql.BinaryFlag},
		{"double unspecified scale", &strsql.Column{Type: ft(mysql.TypeDouble, 0, 22, -1)},
			sqltypes.Float64, 63, 22, 31, mysql.NumFlag | mysql.BinaryFlag},
		{"datetime(6)", &strsql.Column{Type: ft(mysql.TypeDatetime, 0, 26, 6)},
			sqltypes.Datetime, 63, 26, 6, mysql.BinaryFlag},
		{"text", &strsql.Column{Type: ft(mysql.TypeBlob, 0, 65535, 0)},
			sqltypes.Text, 46, 262140, 0, mysql.BlobFlag},
		{"internal flags dropped", &strsql.Column{Type: ft(mysql.TypeLonglong, mysql.IsBooleanFlag|mysql.NotNullFlag, 1, 0)},
			sqltypes.Int64, 63, 1, 0, mysql.NotNullFlag | mysql.NumFlag | mysql.BinaryFlag},
		{"unspecified length", &strsql.Column{Type: ft(mysql.TypeLonglong, 0, -1, -1)},
			sqltypes.Int64, 63, 20, 0, mysql.NumFlag | mysql.BinaryFlag},
	}
	for _, c := range cases {
		f := wireFields([]*strsql.Column{c.col})[0]
		if f.Type != c.typ || f.Charset != c.charset || f.ColumnLength != c.length || f.Decimals != c.decimals || f.Flags != uint32(c.flags) {
			t.Errorf("%s: got type %v charset %d length %d decimals %d flags %#x; want %v %d %d %d %#x",
				c.name, f.Type, f.Charset, f.ColumnLength, f.Decimals, f.Flags, c.typ, c.charset, c.length, c.decimals, c.flags)
		}
	}
}

func TestBinaryEncodingChecksColumnRange(t *testing.T) {
	cols := []*strsql.Column{{Name: "t", Type: ft(mysql.TypeTiny, 0, 4, 0)}}
	enc := newRowEncoder(cols, wireFields(cols), true, nil)
	if _, err := enc.encode([][]types.Datum{{types.NewInt(127)}}); err != nil {
		t.Fatalf("127 in TINYINT: %v", err)
	}
	if _, err := enc.encode([][]types.Datum{{types.NewInt(128)}}); err == nil {
		t.Fatal("128 encoded as a TINYINT")
	}
	// The text protocol has no widths to violate.
	text := newRowEncoder(cols, wireFields(cols), false, nil)
	rows, err := text.encode([][]types.Datum{{types.NewInt(128)}})
	if err != nil || rows[0][0].ToString() != "128" {
		t.Fatalf("text encoding: %v %v", rows, err)
	}
}

func TestBitValuesAreRawBytes(t *testing.T) {
	cols := []*strsql.Column{{Name: "b", Type: ft(mysql.TypeBit, mysql.UnsignedFlag, 12, 0)}}
	for _, binary := range []bool{false, true} {
		enc := newRowEncoder(cols, wireFields(cols), binary, nil)
		rows, err := enc.encode([][]types.Datum{{types.NewUint(0x0abc)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rows[0][0].Raw(); string(got) != "\x0a\xbc" {
			t.Errorf("binary=%v: BIT(12) 0xabc sent as %x", binary, got)
		}
	}
}
