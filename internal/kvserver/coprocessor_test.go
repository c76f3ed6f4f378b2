package kvserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/coprocessor"
	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// The table of testdata/coprocessor: t (id BIGINT PRIMARY KEY, k INT,
// c VARCHAR(20) COLLATE utf8mb4_general_ci, m DECIMAL(6,2), f DOUBLE),
// table id 7, column ids 1-5 (id is the handle, not stored in the value).
const copTableID = 7

type copCol struct {
	name string
	ft   *ptypes.FieldType
}

func copColumns() []copCol {
	id := ptypes.NewFieldType(mysql.TypeLonglong)
	id.SetFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
	k := ptypes.NewFieldType(mysql.TypeLong)
	c := ptypes.NewFieldType(mysql.TypeVarchar)
	c.SetFlen(20)
	c.SetCharset("utf8mb4")
	c.SetCollate("utf8mb4_general_ci")
	m := ptypes.NewFieldType(mysql.TypeNewDecimal)
	m.SetFlen(6)
	m.SetDecimal(2)
	f := ptypes.NewFieldType(mysql.TypeDouble)
	return []copCol{{"id", id}, {"k", k}, {"c", c}, {"m", m}, {"f", f}}
}

type copBinder struct{ cols []copCol }

func (b copBinder) Bind(n ast.ExprNode) (expr.Expr, error) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		for i, col := range b.cols {
			if strings.EqualFold(col.name, c.Name.Name.O) {
				return expr.NewColumn(i, col.ft, col.name), nil
			}
		}
		return nil, fmt.Errorf("unknown column %s", c.Name.Name.O)
	}
	return nil, nil
}

// TestCoprocessor runs the scripts of testdata/coprocessor against a KV
// server: rows are written with real prewrites and commits (several
// versions, deletes, locks left in place), and fragments are evaluated by
// KvCoprocessor at a timestamp.
//
//	write start=S commit=C      rows "id k c m f" (NULL for NULL) or "delete id";
//	                            commit=0 leaves the prewrite locks
//	commit start=S commit=C     commit the listed ids' locks
//	index start=S commit=C      entries of index 1 on (k): "k id" or "delete k id"
//	scan ts=T                   the rows a plain KvScan sees (not pushed)
//	cop ts=T [reverse] [limit=N] [paging=N]
//	                            a fragment, one clause per line:
//	                              columns: id k ...  (the needed columns; default all)
//	                              index:             (scan index 1 on (k), not the rows)
//	                              filter: <expr>
//	                              group: <expr>, ...
//	                              agg: count(*) | sum(<expr>) | avg | min | max, ...
//	                              topn: <expr> [desc], ...
//	                            prints the output rows, then resume/locked/error
func TestCoprocessor(t *testing.T) {
	datadriven.Walk(t, "testdata/coprocessor", func(t *testing.T, path string) {
		s, stop := startServer(t, t.TempDir(), true)
		defer stop()
		ctx := context.Background()
		cols := copColumns()
		p := parser.New()
		compile := func(text string) (expr.Expr, error) {
			stmt, err := p.ParseOneStmt("SELECT "+text, "", "")
			if err != nil {
				return nil, err
			}
			return expr.Compile(stmt.(*ast.SelectStmt).Fields.Fields[0].Expr, copBinder{cols})
		}
		toPB := func(text string) *kvpb.CopExpr {
			e, err := compile(text)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			pe, ok := coprocessor.ExprToPB(e)
			if !ok {
				t.Fatalf("%s cannot be pushed", text)
			}
			return pe
		}
		ids := []int64{2, 3, 4, 5}
		fts := []*ptypes.FieldType{cols[1].ft, cols[2].ft, cols[3].ft, cols[4].ft}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var start, commitTS, ts uint64
			for _, a := range d.CmdArgs {
				if len(a.Vals) == 0 {
					continue
				}
				v, _ := strconv.ParseUint(a.Vals[0], 10, 64)
				switch a.Key {
				case "start":
					start = v
				case "commit":
					commitTS = v
				case "ts":
					ts = v
				}
			}
			switch d.Cmd {
			case "index":
				// Entries of index 1 on (k): "k id", or "delete k id".
				var muts []*kvpb.Mutation
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					op := kvpb.Op_Put
					if f[0] == "delete" {
						op, f = kvpb.Op_Del, f[1:]
					}
					k, _ := strconv.ParseInt(f[0], 10, 64)
					id, _ := strconv.ParseInt(f[1], 10, 64)
					key, val, err := tablecodec.IndexEntry(copTableID, 1, false, []types.Datum{types.NewInt(k)}, id)
					if err != nil {
						t.Fatal(err)
					}
					if op == kvpb.Op_Del {
						val = nil
					}
					muts = append(muts, &kvpb.Mutation{Op: op, Key: key, Value: val})
				}
				pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: start, PrimaryLock: muts[0].Key, LockTtl: 60000, Mutations: muts})
				if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
					return fmt.Sprintf("prewrite: %v %v %v\n", err, pw.GetRegionError(), pw.GetErrors())
				}
				if commitTS == 0 {
					return "ok\n"
				}
				keys := make([][]byte, len(muts))
				for i, m := range muts {
					keys[i] = m.Key
				}
				c, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: start, CommitVersion: commitTS, Keys: keys})
				if err != nil || c.Error != nil || c.RegionError != nil {
					return fmt.Sprintf("commit: %v %+v\n", err, c)
				}
				return "ok\n"
			case "write", "commit":
				var muts []*kvpb.Mutation
				var keys [][]byte
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) == 0 {
						continue
					}
					if f[0] == "delete" || d.Cmd == "commit" {
						id, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
						key := tablecodec.RecordKey(copTableID, id)
						keys = append(keys, key)
						muts = append(muts, &kvpb.Mutation{Op: kvpb.Op_Del, Key: key})
						continue
					}
					id, _ := strconv.ParseInt(f[0], 10, 64)
					vals := make([]types.Datum, 4)
					for i, v := range f[1:] {
						if v == "NULL" {
							continue
						}
						cv, err := types.Convert(types.NewString(v), fts[i])
						if err != nil {
							t.Fatalf("%s: %v", v, err)
						}
						vals[i] = cv
					}
					val, err := codec.EncodeRow(nil, ids, vals)
					if err != nil {
						t.Fatal(err)
					}
					key := tablecodec.RecordKey(copTableID, id)
					keys = append(keys, key)
					muts = append(muts, &kvpb.Mutation{Op: kvpb.Op_Put, Key: key, Value: val})
				}
				if d.Cmd == "write" {
					pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: start, PrimaryLock: keys[0], LockTtl: 60000, Mutations: muts})
					if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
						return fmt.Sprintf("prewrite: %v %v %v\n", err, pw.GetRegionError(), pw.GetErrors())
					}
				}
				if commitTS == 0 {
					return "ok\n"
				}
				c, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: start, CommitVersion: commitTS, Keys: keys})
				if err != nil || c.Error != nil || c.RegionError != nil {
					return fmt.Sprintf("commit: %v %+v\n", err, c)
				}
				return "ok\n"
			case "scan":
				prefix := tablecodec.RecordPrefix(copTableID)
				resp, err := s.KvScan(ctx, &kvpb.ScanRequest{Context: rctx(), StartKey: prefix, EndKey: tablecodec.PrefixEnd(prefix), Version: ts})
				if err != nil {
					t.Fatal(err)
				}
				if resp.Error != nil {
					return lockText(resp.Error)
				}
				var sb strings.Builder
				for _, pair := range resp.Pairs {
					if pair.Error != nil {
						sb.WriteString(lockText(pair.Error))
						continue
					}
					_, h, _ := tablecodec.DecodeRecordKey(pair.Key)
					vals := make([]types.Datum, 4)
					if err := codec.DecodeRow(pair.Value, ids, fts, vals); err != nil {
						t.Fatal(err)
					}
					sb.WriteString(rowText(append([]types.Datum{types.NewInt(h)}, vals...)) + "\n")
				}
				return sb.String()
			case "cop":
				scan := &kvpb.CopScan{TableId: copTableID, HandleOffset: 0, KeysOnly: true}
				needed := map[string]bool{}
				dag := &kvpb.CopDAG{Scan: scan, WarningsLimit: 10, Reverse: d.HasArg("reverse")}
				var paging uint32
				for _, a := range d.CmdArgs {
					if len(a.Vals) == 0 {
						continue
					}
					v, _ := strconv.ParseUint(a.Vals[0], 10, 64)
					switch a.Key {
					case "limit":
						dag.Limit = v
					case "paging":
						paging = uint32(v)
					}
				}
				explicitCols := false
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					clause, text, _ := strings.Cut(line, ":")
					text = strings.TrimSpace(text)
					switch strings.TrimSpace(clause) {
					case "columns":
						explicitCols = true
						for _, c := range strings.Fields(text) {
							needed[c] = true
						}
					case "filter":
						dag.Filter = toPB(text)
					case "group":
						if dag.Agg == nil {
							dag.Agg = &kvpb.CopAgg{}
						}
						for _, g := range splitTop(text) {
							dag.Agg.GroupBy = append(dag.Agg.GroupBy, toPB(g))
						}
					case "agg":
						if dag.Agg == nil {
							dag.Agg = &kvpb.CopAgg{}
						}
						for _, a := range splitTop(text) {
							name, arg, _ := strings.Cut(a, "(")
							arg = strings.TrimSuffix(arg, ")")
							f := &kvpb.CopAggFunc{Name: strings.ToLower(strings.TrimSpace(name))}
							if arg != "*" {
								f.Args = []*kvpb.CopExpr{toPB(arg)}
							}
							dag.Agg.Funcs = append(dag.Agg.Funcs, f)
						}
					case "index":
						// A covering scan of index 1 on (k).
						scan.IndexId, scan.IndexColumns = 1, []int32{1}
					case "topn":
						for _, k := range splitTop(text) {
							desc := strings.HasSuffix(k, " desc")
							dag.TopN = append(dag.TopN, &kvpb.CopSortKey{Expr: toPB(strings.TrimSuffix(k, " desc")), Desc: desc})
						}
					}
				}
				for i, c := range cols {
					info := &kvpb.CopColumnInfo{Id: int64(i + 1), Type: coprocessor.FieldTypeToPB(c.ft), Needed: !explicitCols || needed[c.name]}
					if info.Needed && i > 0 {
						scan.KeysOnly = false
					}
					scan.Columns = append(scan.Columns, info)
				}
				prefix := tablecodec.RecordPrefix(copTableID)
				if scan.IndexId != 0 {
					prefix = tablecodec.IndexPrefix(copTableID, scan.IndexId)
				}
				resp, err := s.KvCoprocessor(ctx, &kvpb.CopRequest{Context: rctx(), Version: ts, Dag: dag, PagingRows: paging,
					Ranges: []*kvpb.KeyRange{{Start: prefix, End: tablecodec.PrefixEnd(prefix)}}})
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				if resp.Error != nil {
					return lockText(resp.Error)
				}
				if resp.EvalError != nil {
					return fmt.Sprintf("eval error %d: %s\n", resp.EvalError.Code, resp.EvalError.Message)
				}
				rows, err := coprocessor.DecodeBatch(resp.Batch, 0)
				if err != nil {
					t.Fatal(err)
				}
				var sb strings.Builder
				fmt.Fprintf(&sb, "scanned %d, %d rows\n", resp.ScannedKeys, len(rows))
				for _, r := range rows {
					sb.WriteString(rowText(r) + "\n")
				}
				if len(resp.ResumeKey) > 0 {
					if _, h, err := tablecodec.DecodeRecordKey(resp.ResumeKey); err == nil {
						fmt.Fprintf(&sb, "resume below id %d\n", h) // reverse: an exclusive upper bound
					} else if _, h, err := tablecodec.DecodeRecordKey(resp.ResumeKey[:len(resp.ResumeKey)-1]); err == nil {
						fmt.Fprintf(&sb, "resume after id %d\n", h) // forward: the key after it
					} else {
						fmt.Fprintf(&sb, "resume at %x\n", resp.ResumeKey)
					}
				}
				for _, w := range resp.Warnings {
					fmt.Fprintf(&sb, "warning %d: %s\n", w.Code, w.Message)
				}
				return sb.String()
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	})
}

// splitTop splits a list at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, from := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[from:i]))
				from = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[from:]))
}

func rowText(r []types.Datum) string {
	parts := make([]string, len(r))
	for i, d := range r {
		if d.IsNull() {
			parts[i] = "NULL"
		} else {
			parts[i] = string(d.AppendText(nil))
		}
	}
	return strings.Join(parts, " ")
}

func lockText(ke *kvpb.KeyError) string {
	if ke.Locked != nil {
		if _, h, err := tablecodec.DecodeRecordKey(ke.Locked.Key); err == nil {
			return fmt.Sprintf("locked: id %d by txn %d\n", h, ke.Locked.LockVersion)
		}
		h, _ := tablecodec.IndexEntryHandle(ke.Locked.Key, nil)
		return fmt.Sprintf("locked: the index entry of id %d by txn %d\n", h, ke.Locked.LockVersion)
	}
	return fmt.Sprintf("key error: %v\n", ke)
}
