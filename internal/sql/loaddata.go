package sql

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// LOAD DATA LOCAL INFILE: the client sends the file over the connection
// (the server's mysql.Conn.LoadInfile, installed with SetLocalInfile); its
// records are parsed as the FIELDS / LINES clauses say and inserted in
// batches through the INSERT write path (conversion, defaults, unique and
// foreign key checks, index entries). As in MySQL, LOCAL implies IGNORE for
// duplicate keys unless REPLACE is given. Outside an explicit transaction
// the load commits every loadCommitRows rows (TiDB commits LOAD DATA in
// batches too), so a large file does not become one huge transaction; a
// failure keeps the batches already committed. LOAD DATA INFILE of a file on the server is refused (1290), as
// MySQL does under secure_file_priv.

// loadBatchRows is how many rows one insert batch holds; loadCommitRows how
// many an autocommit load writes per transaction.
const (
	loadBatchRows  = 1024
	loadCommitRows = loadBatchRows
)

// SetLocalInfile installs the function that fetches a LOAD DATA LOCAL
// file from the client.
func (s *Session) SetLocalInfile(fetch func(name string) (io.ReadCloser, error)) {
	s.x.localInfile = fetch
}

type loadFormat struct {
	fieldTerm, enclosed, lineTerm, lineStart []byte
	escape                                   byte // 0: none
	optEnclosed                              bool
}

func loadFormatOf(n *ast.LoadDataStmt) loadFormat {
	f := loadFormat{fieldTerm: []byte("\t"), lineTerm: []byte("\n"), escape: '\\'}
	if fi := n.FieldsInfo; fi != nil {
		if fi.Terminated != nil {
			f.fieldTerm = []byte(*fi.Terminated)
		}
		if fi.Enclosed != nil {
			f.enclosed = []byte(*fi.Enclosed)
		}
		if fi.Escaped != nil {
			f.escape = 0
			if len(*fi.Escaped) > 0 {
				f.escape = (*fi.Escaped)[0]
			}
		}
		f.optEnclosed = fi.OptEnclosed
	}
	if li := n.LinesInfo; li != nil {
		if li.Terminated != nil {
			f.lineTerm = []byte(*li.Terminated)
		}
		if li.Starting != nil {
			f.lineStart = []byte(*li.Starting)
		}
	}
	return f
}

// recordReader splits a LOAD DATA stream into records of fields; a field
// is nil for NULL (\N, or the bare word NULL when fields are enclosed).
type recordReader struct {
	r   *bufio.Reader
	f   loadFormat
	eof bool
}

func (rr *recordReader) startsWith(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	b, err := rr.r.Peek(len(p))
	return err == nil && bytes.Equal(b, p)
}

// simple reports whether records can be split line by line: one-byte
// line and field terminators, no enclosing character, no line prefix.
func (f loadFormat) simple() bool {
	return len(f.lineTerm) == 1 && len(f.fieldTerm) == 1 && len(f.enclosed) == 0 && len(f.lineStart) == 0
}

// nextSimple is next for a simple format: a line is read at once and split
// on the field terminator; only fields holding the escape character are
// unescaped byte by byte.
func (rr *recordReader) nextSimple() ([][]byte, error) {
	var line []byte
	for {
		part, err := rr.r.ReadSlice(rr.f.lineTerm[0])
		if errors.Is(err, bufio.ErrBufferFull) {
			line = append(line, part...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if line != nil || err != nil {
			line = append(line, part...)
		} else {
			line = append([]byte(nil), part...)
		}
		if err != nil { // io.EOF
			rr.eof = true
			if len(line) == 0 {
				return nil, nil
			}
			break
		}
		line = line[:len(line)-1]
		// An escaped line terminator continues the line.
		if esc := rr.f.escape; esc != 0 && len(line) > 0 && line[len(line)-1] == esc && trailingEscapes(line, esc)%2 == 1 {
			line = append(line, rr.f.lineTerm[0])
			continue
		}
		break
	}
	var fields [][]byte
	ft, esc := rr.f.fieldTerm[0], rr.f.escape
	for start := 0; ; {
		end := start
		for end < len(line) && line[end] != ft {
			if esc != 0 && line[end] == esc && end+1 < len(line) {
				end++
			}
			end++
		}
		fields = append(fields, rr.unescape(line[start:end]))
		if end >= len(line) {
			break
		}
		start = end + 1
	}
	return fields, nil
}

func trailingEscapes(b []byte, esc byte) int {
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == esc; i-- {
		n++
	}
	return n
}

// unescape resolves escape sequences of an unenclosed field; \N alone is
// NULL (nil).
func (rr *recordReader) unescape(f []byte) []byte {
	esc := rr.f.escape
	if esc == 0 || bytes.IndexByte(f, esc) < 0 {
		if f == nil {
			return []byte{}
		}
		return f
	}
	if len(f) == 2 && f[0] == esc && f[1] == 'N' {
		return nil
	}
	out := make([]byte, 0, len(f))
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != esc || i+1 == len(f) {
			out = append(out, c)
			continue
		}
		i++
		switch e := f[i]; e {
		case '0':
			out = append(out, 0)
		case 'b':
			out = append(out, '\b')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'Z':
			out = append(out, 26)
		default:
			out = append(out, e)
		}
	}
	return out
}

// next returns the next record, or nil at the end of the input.
func (rr *recordReader) next() ([][]byte, error) {
	if rr.eof {
		return nil, nil
	}
	if rr.f.simple() {
		return rr.nextSimple()
	}
	if len(rr.f.lineStart) > 0 {
		// Skip to the line prefix; lines without it are skipped.
		for !rr.startsWith(rr.f.lineStart) {
			if _, err := rr.r.ReadByte(); err != nil {
				rr.eof = true
				return nil, nil
			}
		}
		rr.r.Discard(len(rr.f.lineStart))
	}
	if _, err := rr.r.Peek(1); err != nil {
		rr.eof = true
		return nil, nil
	}
	var fields [][]byte
	var cur []byte
	// isNull: the field so far is exactly the escape sequence \N.
	enclosedField, quoted, started, isNull := false, false, false, false
	endField := func() {
		switch {
		case !enclosedField && isNull && len(cur) == 0:
			cur = nil // \N
		case !enclosedField && len(rr.f.enclosed) > 0 && string(cur) == "NULL":
			cur = nil // the bare word NULL when fields may be enclosed
		case cur == nil:
			cur = []byte{}
		}
		fields = append(fields, cur)
		cur, enclosedField, quoted, started, isNull = nil, false, false, false, false
	}
	for {
		if !started && len(rr.f.enclosed) > 0 && rr.startsWith(rr.f.enclosed) {
			rr.r.Discard(len(rr.f.enclosed))
			enclosedField, quoted, started = true, true, true
			cur = []byte{}
			continue
		}
		if quoted {
			if rr.startsWith(rr.f.enclosed) {
				rr.r.Discard(len(rr.f.enclosed))
				// A doubled enclosing character stands for itself.
				if rr.startsWith(rr.f.enclosed) {
					rr.r.Discard(len(rr.f.enclosed))
					cur = append(cur, rr.f.enclosed...)
					continue
				}
				quoted = false
				continue
			}
		} else {
			if rr.startsWith(rr.f.fieldTerm) {
				rr.r.Discard(len(rr.f.fieldTerm))
				endField()
				continue
			}
			if rr.startsWith(rr.f.lineTerm) {
				rr.r.Discard(len(rr.f.lineTerm))
				endField()
				return fields, nil
			}
		}
		c, err := rr.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				rr.eof = true
				if started || cur != nil || len(fields) > 0 {
					endField()
					return fields, nil
				}
				return nil, nil
			}
			return nil, err
		}
		started = true
		if isNull {
			// \N followed by more text is the text "N..." (MySQL reads it so).
			cur, isNull = append(cur, 'N'), false
		}
		if rr.f.escape != 0 && c == rr.f.escape {
			e, err := rr.r.ReadByte()
			if err != nil {
				cur = append(cur, c)
				continue
			}
			switch e {
			case '0':
				cur = append(cur, 0)
			case 'b':
				cur = append(cur, '\b')
			case 'n':
				cur = append(cur, '\n')
			case 'r':
				cur = append(cur, '\r')
			case 't':
				cur = append(cur, '\t')
			case 'Z':
				cur = append(cur, 26)
			case 'N':
				if !enclosedField && len(cur) == 0 && !isNull {
					isNull = true // \N: NULL if nothing follows in the field
					continue
				}
				cur = append(cur, 'N')
			default:
				cur = append(cur, e)
			}
			continue
		}
		if cur == nil {
			cur = []byte{}
		}
		cur = append(cur, c)
	}
}

// loadData runs LOAD DATA [LOCAL] INFILE.
func (s *Session) loadData(ctx context.Context, n *ast.LoadDataStmt) (*Result, error) {
	if n.FileLocRef != ast.FileLocClient {
		return nil, sqlerr.New(1290, "HY000", "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement")
	}
	if n.Format != nil && *n.Format != "delimited data" {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support LOAD DATA FORMAT %s", *n.Format)
	}
	if len(n.ColumnAssignments) > 0 {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support LOAD DATA ... SET")
	}
	for _, cv := range n.ColumnsAndUserVars {
		if cv.UserVar != nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support user variables in LOAD DATA's column list")
		}
	}
	if s.x.localInfile == nil {
		return nil, sqlerr.New(3948, "42000", "Loading local data is disabled; this must be enabled on both the client and server sides")
	}
	if err := s.writeRefused(); err != nil {
		return nil, err
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.tableOf(schema, n.Table)
	if err != nil {
		return nil, err
	}
	if t.IsView() {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support LOAD DATA into a view")
	}
	db, _ := s.dbName(n.Table.Schema.O)
	ins := &plan.Insert{DB: db, Table: t, Replace: n.OnDuplicate == ast.OnDuplicateKeyHandlingReplace}
	ins.Ignore = !ins.Replace // LOCAL: duplicates are skipped, as with IGNORE
	names := n.Columns
	if len(names) == 0 {
		for _, cv := range n.ColumnsAndUserVars {
			if cv.ColumnName != nil {
				names = append(names, cv.ColumnName)
			}
		}
	}
	if len(names) == 0 {
		for _, c := range t.Columns {
			if !c.IsGenerated() {
				ins.Targets = append(ins.Targets, c.Offset)
			}
		}
	} else {
		for _, cn := range names {
			c := t.Column(cn.Name.O)
			if c == nil {
				return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'field list'", cn.Name.O)
			}
			ins.Targets = append(ins.Targets, c.Offset)
		}
	}
	textFT := ptypes.NewFieldType(mysql.TypeVarString)
	cols := make([]*plan.Column, len(ins.Targets))
	for i, off := range ins.Targets {
		cols[i] = &plan.Column{Name: t.Columns[off].Name, Type: textFT}
	}

	file, err := s.x.localInfile(n.Path)
	if err != nil {
		return nil, sqlerr.New(2, "HY000", "LOAD DATA LOCAL INFILE: %v", err)
	}
	defer file.Close()
	rr := &recordReader{r: bufio.NewReaderSize(file, 256<<10), f: loadFormatOf(n)}
	if n.IgnoreLines != nil {
		for i := uint64(0); i < *n.IgnoreLines; i++ {
			if rec, err := rr.next(); err != nil || rec == nil {
				break
			}
		}
	}

	var affected uint64
	var inTxn uint64
	auto := s.autocommitStmt()
	line := 0
	for {
		batch := make([][]types.Datum, 0, loadBatchRows)
		for len(batch) < loadBatchRows {
			rec, err := rr.next()
			if err != nil {
				return nil, err
			}
			if rec == nil {
				break
			}
			line++
			row := make([]types.Datum, len(ins.Targets))
			for i := range row {
				switch {
				case i >= len(rec):
					// A short line: the column gets its type's zero, as in
					// MySQL (which warns 1261).
					row[i] = types.NewString("")
					if i == len(rec) {
						s.warn(1261, "01000", "Row %d doesn't contain data for all columns", line)
					}
				case rec[i] == nil:
					row[i] = types.Null
				default:
					row[i] = types.NewStringBytes(rec[i])
				}
			}
			if len(rec) > len(row) {
				s.warn(1262, "01000", "Row %d was truncated; it contained more data than there were input columns", line)
			}
			batch = append(batch, row)
		}
		if len(batch) == 0 {
			break
		}
		ins.Select = &plan.Values{Name: "load data", Rows: batch}
		plan.SetColumns(ins.Select, cols)
		n, err := s.loadBatch(ctx, ins)
		if err != nil {
			return nil, err
		}
		affected += n
		inTxn += uint64(len(batch))
		if auto && inTxn >= loadCommitRows {
			if err := s.finish(ctx, true); err != nil {
				return nil, err
			}
			inTxn = 0
		}
	}
	if auto {
		if err := s.finish(ctx, true); err != nil {
			return nil, err
		}
	}
	return &Result{AffectedRows: affected}, nil
}

// loadBatch inserts one batch in the session's transaction (begun if
// needed), as one statement: it changes nothing if it fails.
func (s *Session) loadBatch(ctx context.Context, ins *plan.Insert) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	ec := &exec.Context{
		Ctx: ctx, Txn: s.txn, Eval: s.evalContext(nil), IDs: s.e.ids,
		Mem: exec.NewMemTracker(s.memQuota()), Schema: s.schema, FKChecks: !s.x.fkOff, NonStrict: s.x.nonStrict,
	}
	ec.Eval.Ctx = ctx
	ec.Writes = exec.NewStmtBuffer(s.txn)
	if err := exec.RunInsert(ec, ins); err != nil {
		if s.autocommitStmt() {
			s.finish(ctx, false)
		}
		return 0, err
	}
	if err := ec.Writes.Flush(); err != nil {
		return 0, err
	}
	if ec.LastInsertID != 0 && s.lastInsertID == 0 {
		s.lastInsertID = ec.LastInsertID
	}
	return ec.AffectedRows, nil
}
