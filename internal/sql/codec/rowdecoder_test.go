package codec

import (
	"math/rand"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/types"
)

// TestRowDecoderMatchesDecodeRow decodes the rows of a table whose schema
// changed while it was written (columns added, dropped and retyped, so
// rows of several layouts come interleaved, as a scan meets them) with a
// RowDecoder and with DecodeRowKinds, and requires the same values and
// the same errors. Columns of every kind the codec stores, NULLs, columns
// a row lacks (their default), values of varying lengths around the
// wanted ones (a column skipped by a wrong offset reads another value),
// and corrupted rows are all in the mix.
func TestRowDecoderMatchesDecodeRow(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	kinds := append(append([]types.Kind{}, allKinds...), types.KindDuration)
	randomValue := func(k types.Kind) types.Datum {
		switch {
		case rng.Intn(6) == 0:
			return types.Datum{} // NULL
		case k == types.KindDuration:
			return types.NewDuration(rng.Int63n(1<<40)-1<<39, rng.Intn(7))
		}
		return randomDatum(t, rng, k)
	}
	// The types a column may be read as: a stored value of another kind is
	// converted (the column was retyped after the row was written).
	readTypes := []byte{mysql.TypeLonglong, mysql.TypeDouble, mysql.TypeNewDecimal, mysql.TypeVarchar, mysql.TypeDatetime, mysql.TypeDuration}
	randomType := func() *ptypes.FieldType {
		ft := ptypes.NewFieldType(readTypes[rng.Intn(len(readTypes))])
		switch ft.GetType() {
		case mysql.TypeLonglong:
			if rng.Intn(2) == 0 {
				ft.AddFlag(mysql.UnsignedFlag)
			}
		case mysql.TypeNewDecimal:
			ft.SetFlen(30)
			ft.SetDecimal(rng.Intn(6))
		case mysql.TypeVarchar:
			ft.SetFlen(255)
			ft.SetCharset("utf8mb4")
			ft.SetCollate("utf8mb4_bin")
		case mysql.TypeDatetime, mysql.TypeDuration:
			ft.SetDecimal(rng.Intn(7))
		}
		return ft
	}
	for table := 0; table < 300; table++ {
		// Schema versions: each adds a column or drops one; rows are
		// written under a random version.
		type column struct {
			id   int64
			kind types.Kind
		}
		var versions [][]column
		var cols []column
		nextID := int64(1)
		for v, n := 0, 1+rng.Intn(6); v < n; v++ {
			if len(cols) > 1 && rng.Intn(3) == 0 {
				i := rng.Intn(len(cols))
				cols = append(append([]column{}, cols[:i]...), cols[i+1:]...)
			} else {
				for c := 0; c < 1+rng.Intn(8); c++ {
					cols = append(cols, column{nextID, kinds[rng.Intn(len(kinds))]})
					nextID += int64(1 + rng.Intn(3))
				}
			}
			versions = append(versions, append([]column{}, cols...))
		}
		var rows [][]byte
		for r := 0; r < 60; r++ {
			v := versions[rng.Intn(len(versions))]
			ids := make([]int64, len(v))
			ds := make([]types.Datum, len(v))
			for i, c := range v {
				ids[i], ds[i] = c.id, randomValue(c.kind)
			}
			row, err := EncodeRow(nil, ids, ds)
			if err != nil {
				t.Fatal(err)
			}
			switch rng.Intn(20) {
			case 0:
				row = row[:rng.Intn(len(row))]
			case 1:
				row = append([]byte{}, row...)
				row[rng.Intn(len(row))] ^= byte(1 + rng.Intn(255))
			}
			rows = append(rows, row)
		}
		// The read: some columns (also never-written ids) in any order,
		// each with a read type or none, a default or NULL, and a place in
		// a wider output row.
		var want []int64
		for id := int64(1); id <= nextID+1; id++ {
			if rng.Intn(3) != 0 {
				want = append(want, id)
			}
		}
		rng.Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
		hasDuration := map[int64]bool{}
		for _, v := range versions {
			for _, c := range v {
				hasDuration[c.id] = hasDuration[c.id] || c.kind == types.KindDuration
			}
		}
		var fts []*ptypes.FieldType
		if rng.Intn(4) != 0 {
			fts = make([]*ptypes.FieldType, len(want))
			for i, id := range want {
				// (types.Convert does not take TIME values to other types.)
				if rng.Intn(3) == 0 && !hasDuration[id] {
					fts[i] = randomType()
				}
			}
		}
		var defaults []types.Datum
		if rng.Intn(3) != 0 {
			defaults = make([]types.Datum, len(want))
			for i := range defaults {
				defaults[i] = randomValue(kinds[rng.Intn(len(kinds))])
			}
		}
		width := len(want) + rng.Intn(3)
		offsets := rng.Perm(width)[:len(want)]
		dec := NewRowDecoder(want, fts, nil, offsets, defaults)
		got := make([]types.Datum, width)
		for r, row := range rows {
			exp := make([]types.Datum, len(want))
			copy(exp, defaults)
			expErr := DecodeRowKinds(row, want, fts, nil, exp)
			gotErr := dec.Decode(row, got)
			if (expErr == nil) != (gotErr == nil) || (expErr != nil && expErr.Error() != gotErr.Error()) {
				t.Fatalf("table %d row %d %x: DecodeRowKinds: %v, RowDecoder: %v", table, r, row, expErr, gotErr)
			}
			if expErr != nil {
				continue
			}
			for i, id := range want {
				if !sameDatum(got[offsets[i]], exp[i]) {
					t.Fatalf("table %d row %d %x, column %d: RowDecoder %v (%v), DecodeRowKinds %v (%v)",
						table, r, row, id, got[offsets[i]], got[offsets[i]].Kind(), exp[i], exp[i].Kind())
				}
			}
		}
	}
}

// TestRowDecoderDoesNotAllocate: decoding a row of a known layout
// allocates nothing.
func TestRowDecoderDoesNotAllocate(t *testing.T) {
	row, err := EncodeRow(nil, []int64{2, 3, 4}, []types.Datum{types.NewInt(7), types.NewString("ccccccccccccccccc"), types.NewString("pad")})
	if err != nil {
		t.Fatal(err)
	}
	dec := NewRowDecoder([]int64{2, 4}, nil, nil, nil, nil)
	out := make([]types.Datum, 2)
	allocs := testing.AllocsPerRun(100, func() {
		if err := dec.Decode(row, out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("RowDecoder.Decode allocated %v times", allocs)
	}
	if out[0].Int() != 7 || out[1].String() != "pad" {
		t.Fatalf("decoded %v", out)
	}
}

// TestRowDecoderSharedOffsets decodes rows of several layouts with two
// decoders of disjoint columns that share each row's parsed offsets
// (RowOffsets), the second after the first, and requires what one decoder
// of all the columns gives.
func TestRowDecoderSharedOffsets(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	layouts := [][]int64{{1, 2, 3, 4}, {4, 3, 2, 1}, {1, 3}, {2, 4, 5}, {1, 2, 3, 4, 5, 6}}
	var rows [][]byte
	for range 300 {
		ids := layouts[rng.Intn(len(layouts))]
		vals := make([]types.Datum, len(ids))
		for i := range vals {
			if rng.Intn(5) > 0 {
				vals[i] = randomDatum(t, rng, allKinds[rng.Intn(len(allKinds))])
			}
		}
		b, err := EncodeRow(nil, ids, vals)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, b)
	}
	all := NewRowDecoder([]int64{1, 2, 3, 4}, nil, nil, []int{0, 1, 2, 3}, nil)
	first := NewRowDecoder([]int64{3, 1}, nil, nil, []int{2, 0}, nil)
	second := NewRowDecoder([]int64{2, 4}, nil, nil, []int{1, 3}, nil)
	var o RowOffsets
	for i, b := range rows {
		want := make([]types.Datum, 4)
		if err := all.Decode(b, want); err != nil {
			t.Fatal(err)
		}
		got := make([]types.Datum, 4)
		o.Reset()
		if err := first.DecodeShared(b, &o, got); err != nil {
			t.Fatal(err)
		}
		if err := second.DecodeShared(b, &o, got); err != nil {
			t.Fatal(err)
		}
		for c := range want {
			if want[c].Kind() != got[c].Kind() || (!want[c].IsNull() && want[c].String() != got[c].String()) {
				t.Fatalf("row %d column %d: shared %v, whole %v", i, c, got[c], want[c])
			}
		}
	}
}
