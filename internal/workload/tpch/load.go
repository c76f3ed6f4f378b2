package tpch

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/workload"
)

// Tables are the eight tables of clause 1.4 with their primary keys
// (clause 1.4.2.2) and an index on each foreign key the queries join by
// (clause 1.4.2.3 allows them); LINEITEM's (L_PARTKEY, L_SUPPKEY) is its
// foreign key to PARTSUPP.
var Tables = []string{
	`CREATE TABLE nation (n_nationkey INT NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INT NOT NULL,
		n_comment VARCHAR(152), PRIMARY KEY (n_nationkey), KEY n_regionkey (n_regionkey))`,
	`CREATE TABLE region (r_regionkey INT NOT NULL, r_name CHAR(25) NOT NULL, r_comment VARCHAR(152),
		PRIMARY KEY (r_regionkey))`,
	`CREATE TABLE part (p_partkey INT NOT NULL, p_name VARCHAR(55) NOT NULL, p_mfgr CHAR(25) NOT NULL,
		p_brand CHAR(10) NOT NULL, p_type VARCHAR(25) NOT NULL, p_size INT NOT NULL,
		p_container CHAR(10) NOT NULL, p_retailprice DECIMAL(15,2) NOT NULL, p_comment VARCHAR(23) NOT NULL,
		PRIMARY KEY (p_partkey))`,
	`CREATE TABLE supplier (s_suppkey INT NOT NULL, s_name CHAR(25) NOT NULL, s_address VARCHAR(40) NOT NULL,
		s_nationkey INT NOT NULL, s_phone CHAR(15) NOT NULL, s_acctbal DECIMAL(15,2) NOT NULL,
		s_comment VARCHAR(101) NOT NULL, PRIMARY KEY (s_suppkey), KEY s_nationkey (s_nationkey))`,
	`CREATE TABLE partsupp (ps_partkey INT NOT NULL, ps_suppkey INT NOT NULL, ps_availqty INT NOT NULL,
		ps_supplycost DECIMAL(15,2) NOT NULL, ps_comment VARCHAR(199) NOT NULL,
		PRIMARY KEY (ps_partkey, ps_suppkey), KEY ps_suppkey (ps_suppkey))`,
	`CREATE TABLE customer (c_custkey INT NOT NULL, c_name VARCHAR(25) NOT NULL, c_address VARCHAR(40) NOT NULL,
		c_nationkey INT NOT NULL, c_phone CHAR(15) NOT NULL, c_acctbal DECIMAL(15,2) NOT NULL,
		c_mktsegment CHAR(10) NOT NULL, c_comment VARCHAR(117) NOT NULL, PRIMARY KEY (c_custkey),
		KEY c_nationkey (c_nationkey))`,
	`CREATE TABLE orders (o_orderkey INT NOT NULL, o_custkey INT NOT NULL, o_orderstatus CHAR(1) NOT NULL,
		o_totalprice DECIMAL(15,2) NOT NULL, o_orderdate DATE NOT NULL, o_orderpriority CHAR(15) NOT NULL,
		o_clerk CHAR(15) NOT NULL, o_shippriority INT NOT NULL, o_comment VARCHAR(79) NOT NULL,
		PRIMARY KEY (o_orderkey), KEY o_custkey (o_custkey))`,
	`CREATE TABLE lineitem (l_orderkey INT NOT NULL, l_partkey INT NOT NULL, l_suppkey INT NOT NULL,
		l_linenumber INT NOT NULL, l_quantity DECIMAL(15,2) NOT NULL, l_extendedprice DECIMAL(15,2) NOT NULL,
		l_discount DECIMAL(15,2) NOT NULL, l_tax DECIMAL(15,2) NOT NULL, l_returnflag CHAR(1) NOT NULL,
		l_linestatus CHAR(1) NOT NULL, l_shipdate DATE NOT NULL, l_commitdate DATE NOT NULL,
		l_receiptdate DATE NOT NULL, l_shipinstruct CHAR(25) NOT NULL, l_shipmode CHAR(10) NOT NULL,
		l_comment VARCHAR(44) NOT NULL, PRIMARY KEY (l_orderkey, l_linenumber),
		KEY l_partkey_suppkey (l_partkey, l_suppkey))`,
}

// TableNames lists the tables in load order.
var TableNames = []string{"nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"}

// loadBatch is how many rows one INSERT carries.
const loadBatch = 500

// batch accumulates the rows of a multi-row INSERT into one table.
type batch struct {
	ctx    context.Context
	db     *sql.DB
	prefix string
	sb     strings.Builder
	n      int
	count  *atomic.Int64
}

func newBatch(ctx context.Context, db *sql.DB, table string, count *atomic.Int64) *batch {
	return &batch{ctx: ctx, db: db, prefix: "INSERT INTO " + table + " VALUES ", count: count}
}

// add appends a row of SQL literals.
func (b *batch) add(vals ...string) error {
	if b.n == 0 {
		b.sb.WriteString(b.prefix)
	} else {
		b.sb.WriteByte(',')
	}
	b.sb.WriteByte('(')
	for i, v := range vals {
		if i > 0 {
			b.sb.WriteByte(',')
		}
		b.sb.WriteString(v)
	}
	b.sb.WriteByte(')')
	b.n++
	if b.n >= loadBatch {
		return b.flush()
	}
	return nil
}

func (b *batch) flush() error {
	if b.n == 0 {
		return nil
	}
	if _, err := b.db.ExecContext(b.ctx, b.sb.String()); err != nil {
		return fmt.Errorf("%s...: %w", strings.TrimSpace(b.prefix), err)
	}
	b.count.Add(int64(b.n))
	b.sb.Reset()
	b.n = 0
	return nil
}

func str(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
func num(n int) string    { return strconv.Itoa(n) }
func hundredths(n int64) string {
	return "0." + strconv.FormatInt(n/10, 10) + strconv.FormatInt(n%10, 10)
}

// Init creates the database and tables (dropping the database first when
// drop is set) and loads the scale factor with cfg.Threads loaders,
// printing progress to log.
func Init(ctx context.Context, cfg Config, drop bool, log io.Writer) error {
	admin, err := open(ctx, cfg, "", 1)
	if err != nil {
		return err
	}
	defer admin.Close()
	if drop {
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quote(cfg.Database)); err != nil {
			return err
		}
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+quote(cfg.Database)); err != nil {
		return fmt.Errorf("create database %s (use --drop to replace it): %w", cfg.Database, err)
	}
	threads := max(cfg.Threads, 1)
	db, err := open(ctx, cfg, cfg.Database, threads)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, ddl := range Tables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("%.40s: %w", strings.TrimSpace(ddl), err)
		}
	}
	g := NewGenerator(cfg.ScaleFactor, cfg.Seed)
	var rows atomic.Int64
	// Work units: the orders (the most rows) first, so that the loaders
	// finish together.
	type unit func() error
	var units []unit
	for c := 0; c < Chunks(g.Sizes.Orders); c++ {
		units = append(units, func() error { return loadOrders(ctx, db, g, c, &rows) })
	}
	for c := 0; c < Chunks(g.Sizes.Parts); c++ {
		units = append(units, func() error { return loadParts(ctx, db, g, c, &rows) })
	}
	for c := 0; c < Chunks(g.Sizes.Customers); c++ {
		units = append(units, func() error { return loadCustomers(ctx, db, g, c, &rows) })
	}
	for c := 0; c < Chunks(g.Sizes.Suppliers); c++ {
		units = append(units, func() error { return loadSuppliers(ctx, db, g, c, &rows) })
	}
	units = append(units, func() error { return loadNations(ctx, db, &rows) })

	begin := time.Now()
	run := make([]func(int) error, len(units))
	for i, u := range units {
		run[i] = func(int) error { return u() }
	}
	if err := workload.RunUnits(ctx, threads, run, &rows, log, 10*time.Second); err != nil {
		return err
	}
	el := time.Since(begin)
	fmt.Fprintf(log, "loaded scale factor %g (%d rows) in %s (%.0f rows/s)\n", cfg.ScaleFactor, rows.Load(),
		el.Round(time.Millisecond), float64(rows.Load())/el.Seconds())
	// Fresh statistics for the planners that keep them; a server without
	// ANALYZE TABLE is told once.
	for _, t := range TableNames {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+t); err != nil {
			fmt.Fprintf(log, "statistics not refreshed: ANALYZE TABLE %s: %v\n", t, err)
			break
		}
	}
	return nil
}

func loadNations(ctx context.Context, db *sql.DB, rows *atomic.Int64) error {
	r := newRng(DefaultSeed, 7, 0)
	pool := textPool(DefaultSeed)
	nb := newBatch(ctx, db, "nation", rows)
	for k, n := range nations {
		if err := nb.add(num(k), str(n.name), num(n.region), str(r.text(pool, 31, 114))); err != nil {
			return err
		}
	}
	rb := newBatch(ctx, db, "region", rows)
	for k, n := range regions {
		if err := rb.add(num(k), str(n), str(r.text(pool, 31, 115))); err != nil {
			return err
		}
	}
	if err := nb.flush(); err != nil {
		return err
	}
	return rb.flush()
}

func loadParts(ctx context.Context, db *sql.DB, g *Generator, c int, rows *atomic.Int64) error {
	pb := newBatch(ctx, db, "part", rows)
	sb := newBatch(ctx, db, "partsupp", rows)
	var err error
	g.Parts(c, func(p *Part) {
		if err != nil {
			return
		}
		err = pb.add(num(p.Key), str(p.Name), str(p.Mfgr), str(p.Brand), str(p.Type), num(p.Size),
			str(p.Container), cents(retailPrice(p.Key)), str(p.Cmt))
		for _, s := range p.Supps {
			if err == nil {
				err = sb.add(num(p.Key), num(s.Supp), num(s.Avail), cents(s.Cost), str(s.Cmt))
			}
		}
	})
	if err != nil {
		return err
	}
	if err := pb.flush(); err != nil {
		return err
	}
	return sb.flush()
}

func loadSuppliers(ctx context.Context, db *sql.DB, g *Generator, c int, rows *atomic.Int64) error {
	b := newBatch(ctx, db, "supplier", rows)
	var err error
	g.Suppliers(c, func(s *Supplier) {
		if err == nil {
			err = b.add(num(s.Key), str(s.Name), str(s.Address), num(s.Nation), str(s.Phone), cents(s.Balance), str(s.Cmt))
		}
	})
	if err != nil {
		return err
	}
	return b.flush()
}

func loadCustomers(ctx context.Context, db *sql.DB, g *Generator, c int, rows *atomic.Int64) error {
	b := newBatch(ctx, db, "customer", rows)
	var err error
	g.Customers(c, func(cu *Customer) {
		if err == nil {
			err = b.add(num(cu.Key), str(cu.Name), str(cu.Address), num(cu.Nation), str(cu.Phone), cents(cu.Balance),
				str(cu.Segment), str(cu.Cmt))
		}
	})
	if err != nil {
		return err
	}
	return b.flush()
}

func loadOrders(ctx context.Context, db *sql.DB, g *Generator, c int, rows *atomic.Int64) error {
	ob := newBatch(ctx, db, "orders", rows)
	lb := newBatch(ctx, db, "lineitem", rows)
	var err error
	g.Orders(c, func(o *Order) {
		if err != nil {
			return
		}
		err = ob.add(num(o.Key), num(o.Cust), str(o.Status), cents(o.Total), str(day(o.Date)), str(o.Priority),
			str("Clerk#"+pad9(o.Clerk)), "0", str(o.Cmt))
		for _, l := range o.Lines {
			if err == nil {
				err = lb.add(num(o.Key), num(l.Part), num(l.Supp), num(l.Number), num(l.Quantity), cents(l.Extended),
					hundredths(l.Discount), hundredths(l.Tax), str(l.ReturnFlag), str(l.LineStatus), str(day(l.Ship)),
					str(day(l.Commit)), str(day(l.Receipt)), str(l.Instruct), str(l.Mode), str(l.Cmt))
			}
		}
	})
	if err != nil {
		return err
	}
	if err := ob.flush(); err != nil {
		return err
	}
	return lb.flush()
}
