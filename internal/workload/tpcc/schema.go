package tpcc

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/workload"
)

// tables are the TPC-C tables (clause 1.3), with the keys the transactions
// read by: composite primary keys as the spec lists them, customer by last
// name and orders by customer as secondary indexes. history has no key in
// the spec; an auto-increment one identifies its rows.
var tables = []string{
	`CREATE TABLE warehouse (
		w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
		w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2),
		PRIMARY KEY (w_id))`,
	`CREATE TABLE district (
		d_id INT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
		d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4,4),
		d_ytd DECIMAL(12,2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id))`,
	`CREATE TABLE customer (
		c_id INT NOT NULL, c_d_id INT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16), c_middle CHAR(2),
		c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),
		c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2),
		c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2),
		c_ytd_payment DECIMAL(12,2), c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500),
		PRIMARY KEY (c_w_id, c_d_id, c_id), KEY idx_customer (c_w_id, c_d_id, c_last, c_first))`,
	`CREATE TABLE history (
		h_id BIGINT NOT NULL AUTO_INCREMENT, h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT,
		h_w_id INT, h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24), PRIMARY KEY (h_id),
		KEY idx_history_c (h_c_w_id, h_c_d_id, h_c_id))`,
	`CREATE TABLE new_order (
		no_o_id INT NOT NULL, no_d_id INT NOT NULL, no_w_id INT NOT NULL,
		PRIMARY KEY (no_w_id, no_d_id, no_o_id))`,
	`CREATE TABLE orders (
		o_id INT NOT NULL, o_d_id INT NOT NULL, o_w_id INT NOT NULL, o_c_id INT, o_entry_d DATETIME,
		o_carrier_id INT, o_ol_cnt INT, o_all_local INT, PRIMARY KEY (o_w_id, o_d_id, o_id),
		KEY idx_order (o_w_id, o_d_id, o_c_id, o_id))`,
	`CREATE TABLE order_line (
		ol_o_id INT NOT NULL, ol_d_id INT NOT NULL, ol_w_id INT NOT NULL, ol_number INT NOT NULL,
		ol_i_id INT NOT NULL, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity INT,
		ol_amount DECIMAL(6,2), ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))`,
	`CREATE TABLE item (
		i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),
		PRIMARY KEY (i_id))`,
	`CREATE TABLE stock (
		s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT, s_dist_01 CHAR(24), s_dist_02 CHAR(24),
		s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24),
		s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt INT,
		s_remote_cnt INT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id))`,
}

// loadBatch is how many rows one INSERT of the load carries.
const loadBatch = 500

// inserter batches rows into multi-row INSERTs of one table.
type inserter struct {
	ctx    context.Context
	db     *sql.DB
	prefix string
	rows   []string
	args   []any
	count  *atomic.Int64
}

func (in *inserter) add(args ...any) error {
	in.rows = append(in.rows, "("+strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")+")")
	in.args = append(in.args, args...)
	if len(in.rows) >= loadBatch {
		return in.flush()
	}
	return nil
}

func (in *inserter) flush() error {
	if len(in.rows) == 0 {
		return nil
	}
	// Literal values: a 500-row INSERT with thousands of placeholders
	// would be prepared once per batch for nothing.
	q := in.prefix + " VALUES " + strings.Join(in.rows, ",")
	if _, err := in.db.ExecContext(in.ctx, inline(q, in.args)); err != nil {
		return fmt.Errorf("%.60s...: %w", in.prefix, err)
	}
	in.count.Add(int64(len(in.rows)))
	in.rows, in.args = in.rows[:0], in.args[:0]
	return nil
}

// inline replaces the ? of q by the literals of args (load data only:
// numbers, NULL, times and strings of the generators' alphabet).
func inline(q string, args []any) string {
	var sb strings.Builder
	sb.Grow(len(q) + 16*len(args))
	i := 0
	for _, part := range strings.SplitAfter(q, "?") {
		if !strings.HasSuffix(part, "?") {
			sb.WriteString(part)
			continue
		}
		sb.WriteString(part[:len(part)-1])
		switch v := args[i].(type) {
		case nil:
			sb.WriteString("NULL")
		case string:
			sb.WriteString("'" + strings.ReplaceAll(v, "'", "''") + "'")
		case time.Time:
			sb.WriteString("'" + v.Format("2006-01-02 15:04:05") + "'")
		case float64:
			fmt.Fprintf(&sb, "%.2f", v)
		default:
			fmt.Fprint(&sb, v)
		}
		i++
	}
	return sb.String()
}

// Init creates the database and tables (dropping an existing database
// first when drop is set) and loads cfg.Warehouses warehouses with
// cfg.Threads loaders, printing progress to log.
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
	db, err := open(ctx, cfg, cfg.Database, max(cfg.Threads, 1))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, ddl := range tables {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("%.40s: %w", strings.TrimSpace(ddl), err)
		}
	}
	// Work units: the items, then per warehouse its row, stock and
	// districts, then per district its customers and orders.
	type unit func(r rng, c *atomic.Int64) error
	var units []unit
	sz := cfg.sizes()
	units = append(units, func(r rng, c *atomic.Int64) error { return loadItems(ctx, db, r, c, sz) })
	for w := 1; w <= cfg.Warehouses; w++ {
		units = append(units, func(r rng, c *atomic.Int64) error { return loadWarehouse(ctx, db, r, c, sz, w) })
		for d := 1; d <= districtsPerWH; d++ {
			units = append(units, func(r rng, c *atomic.Int64) error { return loadDistrict(ctx, db, r, c, sz, w, d) })
		}
	}
	var rows atomic.Int64
	threads := max(cfg.Threads, 1)
	rngs := make([]rng, threads)
	for t := range rngs {
		rngs[t] = newRng(cfg.Seed, 1000+t)
	}
	run := make([]func(int) error, len(units))
	for i, u := range units {
		run[i] = func(w int) error { return u(rngs[w], &rows) }
	}
	begin := time.Now()
	if err := workload.RunUnits(ctx, threads, run, &rows, log, 5*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(log, "loaded %d warehouses (%d rows) in %s\n", cfg.Warehouses, rows.Load(), time.Since(begin).Round(time.Millisecond))
	return nil
}

func loadItems(ctx context.Context, db *sql.DB, r rng, c *atomic.Int64, sz sizes) error {
	in := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO item (i_id, i_im_id, i_name, i_price, i_data)"}
	for i := 1; i <= sz.items; i++ {
		if err := in.add(i, r.uniform(1, 10000), r.astring(14, 24), r.amount(1, 100), r.data()); err != nil {
			return err
		}
	}
	return in.flush()
}

func loadWarehouse(ctx context.Context, db *sql.DB, r rng, c *atomic.Int64, sz sizes, w int) error {
	wh := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO warehouse (w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd)"}
	// W_YTD is 300,000.00 and D_YTD 30,000.00 (clause 4.3.3.1): the
	// history rows of 10.00, one per customer (in proportion when scaled).
	if err := wh.add(w, r.astring(6, 10), r.astring(10, 20), r.astring(10, 20), r.astring(10, 20), r.astring(2, 2), r.zip(),
		float64(r.IntN(2001))/10000, float64(100*sz.customers)); err != nil {
		return err
	}
	if err := wh.flush(); err != nil {
		return err
	}
	st := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO stock (s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, " +
		"s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data)"}
	for i := 1; i <= sz.items; i++ {
		args := []any{i, w, r.uniform(10, 100)}
		for d := 0; d < 10; d++ {
			args = append(args, r.astring(24, 24))
		}
		args = append(args, 0, 0, 0, r.data())
		if err := st.add(args...); err != nil {
			return err
		}
	}
	return st.flush()
}

func loadDistrict(ctx context.Context, db *sql.DB, r rng, c *atomic.Int64, sz sizes, w, d int) error {
	dist := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO district (d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id)"}
	if err := dist.add(d, w, r.astring(6, 10), r.astring(10, 20), r.astring(10, 20), r.astring(10, 20), r.astring(2, 2), r.zip(),
		float64(r.IntN(2001))/10000, float64(10*sz.customers), sz.orders+1); err != nil {
		return err
	}
	if err := dist.flush(); err != nil {
		return err
	}
	now := time.Now().Truncate(time.Second)
	cust := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO customer (c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, " +
		"c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, " +
		"c_payment_cnt, c_delivery_cnt, c_data)"}
	hist := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)"}
	for id := 1; id <= sz.customers; id++ {
		last := r.nurand(255, cLastLoad, 0, 999)
		if id <= 1000 {
			last = id - 1
		}
		credit := "GC"
		if r.IntN(10) == 0 {
			credit = "BC"
		}
		if err := cust.add(id, d, w, r.astring(8, 16), "OE", lastName(last), r.astring(10, 20), r.astring(10, 20), r.astring(10, 20),
			r.astring(2, 2), r.zip(), r.nstring(16), now, credit, 50000.0, float64(r.IntN(5001))/10000, -10.0, 10.0, 1, 0,
			r.astring(300, 500)); err != nil {
			return err
		}
		if err := hist.add(id, d, w, d, w, now, 10.0, r.astring(12, 24)); err != nil {
			return err
		}
	}
	if err := cust.flush(); err != nil {
		return err
	}
	if err := hist.flush(); err != nil {
		return err
	}
	orders := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)"}
	lines := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, " +
		"ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)"}
	newOrders := &inserter{ctx: ctx, db: db, count: c, prefix: "INSERT INTO new_order (no_o_id, no_d_id, no_w_id)"}
	perm := r.Perm(sz.customers)
	for o := 1; o <= sz.orders; o++ {
		var carrier any
		delivered := o < sz.newFrom
		if delivered {
			carrier = r.uniform(1, 10)
		}
		cnt := r.uniform(5, 15)
		if err := orders.add(o, d, w, perm[o-1]+1, now, carrier, cnt, 1); err != nil {
			return err
		}
		for n := 1; n <= cnt; n++ {
			var deliveryD any
			amount := 0.0
			if delivered {
				deliveryD = now
			} else {
				amount = r.amount(0.01, 9999.99)
			}
			if err := lines.add(o, d, w, n, r.uniform(1, sz.items), w, deliveryD, 5, amount, r.astring(24, 24)); err != nil {
				return err
			}
		}
		if !delivered {
			if err := newOrders.add(o, d, w); err != nil {
				return err
			}
		}
	}
	for _, in := range []*inserter{orders, lines, newOrders} {
		if err := in.flush(); err != nil {
			return err
		}
	}
	return nil
}
