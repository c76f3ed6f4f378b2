package tpcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Transaction types, in report order.
const (
	txNewOrder = iota
	txPayment
	txOrderStatus
	txDelivery
	txStockLevel
	txTypes
)

var txNames = []string{"new_order", "payment", "order_status", "delivery", "stock_level"}

// mix is each type's share in percent (clause 5.2.3's minimums, New-Order
// taking the rest).
var mix = [txTypes]int{45, 43, 4, 4, 4}

// errRollback is New-Order's intended rollback (clause 2.4.2.3): an
// unused item number. It completes the business transaction.
var errRollback = errors.New("new-order rolled back (unused item)")

// worker is one terminal: a connection, its prepared statements, its home
// warehouse.
type worker struct {
	conn  *sql.Conn
	r     rng
	w, nw int // home warehouse, warehouses
	sz    sizes
	stmts map[string]*sql.Stmt
}

func newWorker(ctx context.Context, db *sql.DB, r rng, sz sizes, w, nw int) (*worker, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{conn: conn, r: r, w: w, nw: nw, sz: sz, stmts: map[string]*sql.Stmt{}}, nil
}

func (k *worker) close() {
	for _, s := range k.stmts {
		s.Close()
	}
	k.conn.Close()
}

// stmt returns q prepared on the worker's connection.
func (k *worker) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := k.stmts[q]; ok {
		return s, nil
	}
	s, err := k.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	k.stmts[q] = s
	return s, nil
}

func (k *worker) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := k.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

func (k *worker) queryRow(ctx context.Context, q string, args ...any) (*sql.Row, error) {
	s, err := k.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryRowContext(ctx, args...), nil
}

func (k *worker) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := k.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (k *worker) scanRow(ctx context.Context, q string, args []any, dest ...any) error {
	row, err := k.queryRow(ctx, q, args...)
	if err != nil {
		return err
	}
	return row.Scan(dest...)
}

// txn runs fn between BEGIN and COMMIT, rolling back when it fails.
func (k *worker) txn(ctx context.Context, fn func() error) error {
	if _, err := k.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rerr := k.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := k.conn.ExecContext(ctx, "COMMIT")
	return err
}

// placeholders returns "(?,?),(?,?)..." for n tuples of width w.
func placeholders(n, w int) string {
	t := "(" + strings.TrimSuffix(strings.Repeat("?,", w), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(t+",", n), ",")
}

// customerByName picks the customer of a payment or order status by last
// name: the one in the middle of those with the name, by first name
// (clause 2.5.2.2).
func (k *worker) customerByName(ctx context.Context, w, d int, last string) (int, error) {
	rows, err := k.query(ctx, "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first", w, d, last)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("no customer named %s in district %d.%d", last, w, d)
	}
	return ids[(len(ids)-1)/2], nil
}

// newOrder is clause 2.4.
func (k *worker) newOrder(ctx context.Context) error {
	r := k.r
	w, d := k.w, r.uniform(1, districtsPerWH)
	c := r.nurand(1023, cCustomer, 1, k.sz.customers)
	n := r.uniform(5, 15)
	type line struct{ item, supply, qty int }
	lines := make([]line, n)
	allLocal := 1
	for i := range lines {
		lines[i] = line{item: r.nurand(8191, cItem, 1, k.sz.items), supply: w, qty: r.uniform(1, 10)}
		if k.nw > 1 && r.IntN(100) == 0 {
			for lines[i].supply == w {
				lines[i].supply = r.uniform(1, k.nw)
			}
			allLocal = 0
		}
	}
	rollback := r.IntN(100) == 0
	if rollback {
		lines[n-1].item = k.sz.items + 1
	}
	// Stock rows are locked in key order, so two New-Orders never wait
	// for each other in a cycle.
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].supply != lines[j].supply {
			return lines[i].supply < lines[j].supply
		}
		return lines[i].item < lines[j].item
	})
	return k.txn(ctx, func() error {
		var discount, wTax, dTax float64
		var last, credit string
		if err := k.scanRow(ctx, "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?",
			[]any{w, d, c}, &discount, &last, &credit, &wTax); err != nil {
			return fmt.Errorf("customer: %w", err)
		}
		var oid int
		if err := k.scanRow(ctx, "SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE", []any{w, d}, &oid, &dTax); err != nil {
			return fmt.Errorf("district: %w", err)
		}
		if _, err := k.exec(ctx, "UPDATE district SET d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?", oid+1, w, d); err != nil {
			return err
		}
		now := time.Now().Truncate(time.Second)
		if _, err := k.exec(ctx, "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) VALUES (?, ?, ?, ?, ?, ?, ?)",
			oid, d, w, c, now, n, allLocal); err != nil {
			return err
		}
		if _, err := k.exec(ctx, "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)", oid, d, w); err != nil {
			return err
		}
		// The items, in one query.
		ids := map[int]bool{}
		var itemArgs []any
		for _, l := range lines {
			if !ids[l.item] {
				ids[l.item] = true
				itemArgs = append(itemArgs, l.item)
			}
		}
		rows, err := k.query(ctx, "SELECT i_id, i_price, i_name, i_data FROM item WHERE i_id IN ("+strings.TrimSuffix(strings.Repeat("?,", len(itemArgs)), ",")+")", itemArgs...)
		if err != nil {
			return err
		}
		type itemRow struct {
			price      float64
			name, data string
		}
		found := map[int]itemRow{}
		for rows.Next() {
			var id int
			var it itemRow
			if err := rows.Scan(&id, &it.price, &it.name, &it.data); err != nil {
				rows.Close()
				return err
			}
			found[id] = it
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(found) != len(itemArgs) {
			return errRollback
		}
		// The stock rows, locked, in one query: (s_w_id, s_i_id) IN (...).
		var stockArgs []any
		seen := map[[2]int]bool{}
		for _, l := range lines {
			key := [2]int{l.supply, l.item}
			if !seen[key] {
				seen[key] = true
				stockArgs = append(stockArgs, l.supply, l.item)
			}
		}
		dist := fmt.Sprintf("s_dist_%02d", d)
		rows, err = k.query(ctx, "SELECT s_w_id, s_i_id, s_quantity, s_data, "+dist+" FROM stock WHERE (s_w_id, s_i_id) IN ("+placeholders(len(stockArgs)/2, 2)+") FOR UPDATE", stockArgs...)
		if err != nil {
			return err
		}
		type stockRow struct {
			qty        int
			data, dist string
		}
		stock := map[[2]int]*stockRow{}
		for rows.Next() {
			var sw, si int
			st := &stockRow{}
			if err := rows.Scan(&sw, &si, &st.qty, &st.data, &st.dist); err != nil {
				rows.Close()
				return err
			}
			stock[[2]int{sw, si}] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var olArgs []any
		for i, l := range lines {
			st := stock[[2]int{l.supply, l.item}]
			if st == nil {
				return fmt.Errorf("no stock row for item %d of warehouse %d", l.item, l.supply)
			}
			if st.qty >= l.qty+10 {
				st.qty -= l.qty
			} else {
				st.qty = st.qty - l.qty + 91
			}
			remote := 0
			if l.supply != w {
				remote = 1
			}
			if _, err := k.exec(ctx, "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? WHERE s_w_id = ? AND s_i_id = ?",
				st.qty, l.qty, remote, l.supply, l.item); err != nil {
				return err
			}
			amount := float64(l.qty) * found[l.item].price
			olArgs = append(olArgs, oid, d, w, i+1, l.item, l.supply, l.qty, float64(int64(amount*100+0.5))/100, st.dist)
		}
		_, err = k.exec(ctx, "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_dist_info) VALUES "+
			placeholders(len(lines), 9), olArgs...)
		return err
	})
}

// payment is clause 2.5.
func (k *worker) payment(ctx context.Context) error {
	r := k.r
	w, d := k.w, r.uniform(1, districtsPerWH)
	cw, cd := w, d
	if k.nw > 1 && r.IntN(100) < 15 {
		for cw == w {
			cw = r.uniform(1, k.nw)
		}
		cd = r.uniform(1, districtsPerWH)
	}
	byName := r.IntN(100) < 60
	last := k.sz.lastName(r)
	c := r.nurand(1023, cCustomer, 1, k.sz.customers)
	amount := r.amount(1, 5000)
	return k.txn(ctx, func() error {
		if _, err := k.exec(ctx, "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?", amount, w); err != nil {
			return err
		}
		var wName, dName string
		var street1, street2, city, state, zip string
		if err := k.scanRow(ctx, "SELECT w_street_1, w_street_2, w_city, w_state, w_zip, w_name FROM warehouse WHERE w_id = ?",
			[]any{w}, &street1, &street2, &city, &state, &zip, &wName); err != nil {
			return err
		}
		if _, err := k.exec(ctx, "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?", amount, w, d); err != nil {
			return err
		}
		if err := k.scanRow(ctx, "SELECT d_street_1, d_street_2, d_city, d_state, d_zip, d_name FROM district WHERE d_w_id = ? AND d_id = ?",
			[]any{w, d}, &street1, &street2, &city, &state, &zip, &dName); err != nil {
			return err
		}
		if byName {
			var err error
			if c, err = k.customerByName(ctx, cw, cd, last); err != nil {
				return err
			}
		}
		var first, middle, clast, credit string
		var balance, ytd float64
		var cnt int
		if err := k.scanRow(ctx, "SELECT c_first, c_middle, c_last, c_credit, c_balance, c_ytd_payment, c_payment_cnt FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
			[]any{cw, cd, c}, &first, &middle, &clast, &credit, &balance, &ytd, &cnt); err != nil {
			return fmt.Errorf("customer: %w", err)
		}
		if credit == "BC" {
			var data string
			if err := k.scanRow(ctx, "SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", []any{cw, cd, c}, &data); err != nil {
				return err
			}
			data = fmt.Sprintf("%d %d %d %d %d %.2f|%s", c, cd, cw, d, w, amount, data)
			if len(data) > 500 {
				data = data[:500]
			}
			if _, err := k.exec(ctx, "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
				amount, amount, data, cw, cd, c); err != nil {
				return err
			}
		} else if _, err := k.exec(ctx, "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
			amount, amount, cw, cd, c); err != nil {
			return err
		}
		_, err := k.exec(ctx, "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			c, cd, cw, d, w, time.Now().Truncate(time.Second), amount, wName+"    "+dName)
		return err
	})
}

// orderStatus is clause 2.6 (read-only).
func (k *worker) orderStatus(ctx context.Context) error {
	r := k.r
	w, d := k.w, r.uniform(1, districtsPerWH)
	byName := r.IntN(100) < 60
	last := k.sz.lastName(r)
	c := r.nurand(1023, cCustomer, 1, k.sz.customers)
	return k.txn(ctx, func() error {
		if byName {
			var err error
			if c, err = k.customerByName(ctx, w, d, last); err != nil {
				return err
			}
		}
		var balance float64
		var first, middle, clast string
		if err := k.scanRow(ctx, "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
			[]any{w, d, c}, &balance, &first, &middle, &clast); err != nil {
			return fmt.Errorf("customer: %w", err)
		}
		var oid int
		var carrier sql.NullInt64
		var entry time.Time
		err := k.scanRow(ctx, "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
			[]any{w, d, c}, &oid, &carrier, &entry)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // a customer without orders (possible after load)
		}
		if err != nil {
			return err
		}
		rows, err := k.query(ctx, "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?", w, d, oid)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var item, supply, qty int
			var amount float64
			var delivered sql.NullTime
			if err := rows.Scan(&item, &supply, &qty, &amount, &delivered); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// delivery is clause 2.7, for all ten districts in one transaction, with
// the per-district work batched over the districts by row constructors.
func (k *worker) delivery(ctx context.Context) error {
	w := k.w
	carrier := k.r.uniform(1, 10)
	return k.txn(ctx, func() error {
		type order struct{ d, o, c int }
		var orders []order
		for d := 1; d <= districtsPerWH; d++ {
			var o int
			err := k.scanRow(ctx, "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id LIMIT 1 FOR UPDATE", []any{w, d}, &o)
			if errors.Is(err, sql.ErrNoRows) {
				continue // nothing to deliver in this district
			}
			if err != nil {
				return err
			}
			orders = append(orders, order{d: d, o: o})
		}
		if len(orders) == 0 {
			return nil
		}
		keys := make([]any, 0, 3*len(orders))
		for _, o := range orders {
			keys = append(keys, w, o.d, o.o)
		}
		tuples := placeholders(len(orders), 3)
		if _, err := k.exec(ctx, "DELETE FROM new_order WHERE (no_w_id, no_d_id, no_o_id) IN ("+tuples+")", keys...); err != nil {
			return err
		}
		// Locking reads: the orders found above may be younger than the
		// transaction's snapshot (a server that takes it at BEGIN, as
		// Strata and TiDB do, would not see them in a plain SELECT).
		rows, err := k.query(ctx, "SELECT o_d_id, o_c_id FROM orders WHERE (o_w_id, o_d_id, o_id) IN ("+tuples+") FOR UPDATE", keys...)
		if err != nil {
			return err
		}
		custOf := map[int]int{}
		for rows.Next() {
			var d, c int
			if err := rows.Scan(&d, &c); err != nil {
				rows.Close()
				return err
			}
			custOf[d] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := k.exec(ctx, "UPDATE orders SET o_carrier_id = ? WHERE (o_w_id, o_d_id, o_id) IN ("+tuples+")", append([]any{carrier}, keys...)...); err != nil {
			return err
		}
		now := time.Now().Truncate(time.Second)
		if _, err := k.exec(ctx, "UPDATE order_line SET ol_delivery_d = ? WHERE (ol_w_id, ol_d_id, ol_o_id) IN ("+tuples+")", append([]any{now}, keys...)...); err != nil {
			return err
		}
		rows, err = k.query(ctx, "SELECT ol_d_id, SUM(ol_amount) FROM order_line WHERE (ol_w_id, ol_d_id, ol_o_id) IN ("+tuples+") GROUP BY ol_d_id FOR UPDATE", keys...)
		if err != nil {
			return err
		}
		sums := map[int]float64{}
		for rows.Next() {
			var d int
			var s float64
			if err := rows.Scan(&d, &s); err != nil {
				rows.Close()
				return err
			}
			sums[d] = s
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, o := range orders {
			if _, err := k.exec(ctx, "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
				sums[o.d], w, o.d, custOf[o.d]); err != nil {
				return err
			}
		}
		return nil
	})
}

// stockLevel is clause 2.8 (read-only): the distinct items of the last 20
// orders of a district, then how many of them are low in stock.
func (k *worker) stockLevel(ctx context.Context) error {
	w, d := k.w, k.r.uniform(1, districtsPerWH)
	threshold := k.r.uniform(10, 20)
	return k.txn(ctx, func() error {
		var next int
		if err := k.scanRow(ctx, "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?", []any{w, d}, &next); err != nil {
			return err
		}
		rows, err := k.query(ctx, "SELECT DISTINCT ol_i_id FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id < ? AND ol_o_id >= ?", w, d, next, next-20)
		if err != nil {
			return err
		}
		var args []any
		for rows.Next() {
			var i int
			if err := rows.Scan(&i); err != nil {
				rows.Close()
				return err
			}
			args = append(args, i)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(args) == 0 {
			return err
		}
		var low int
		return k.scanRow(ctx, "SELECT COUNT(*) FROM stock WHERE s_w_id = ? AND s_quantity < ? AND s_i_id IN ("+strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")+")",
			append([]any{w, threshold}, args...), &low)
	})
}
