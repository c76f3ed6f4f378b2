package tpcc

import (
	"context"
	"fmt"
	"io"
	"time"
)

// consistency is one condition of clause 3.3.2: a query counting the rows
// (warehouses, districts, orders, customers) that violate it.
type consistency struct {
	name, query string
}

// The conditions, as queries a MySQL server runs: several read one row
// per warehouse, district or order through a correlated subquery, as the
// spec states them; the customer balances use grouped joins.
var consistencies = []consistency{
	{"3.3.2.1 W_YTD = sum(D_YTD)",
		`SELECT COUNT(*) FROM warehouse w WHERE w.w_ytd <> (SELECT SUM(d.d_ytd) FROM district d WHERE d.d_w_id = w.w_id)`},
	{"3.3.2.2 D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
		`SELECT COUNT(*) FROM district d WHERE d.d_next_o_id - 1 <> (SELECT MAX(o.o_id) FROM orders o WHERE o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id)
		 OR d.d_next_o_id - 1 <> (SELECT MAX(n.no_o_id) FROM new_order n WHERE n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id)`},
	{"3.3.2.3 max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER)",
		`SELECT COUNT(*) FROM (SELECT MAX(no_o_id) - MIN(no_o_id) + 1 AS span, COUNT(*) AS n FROM new_order GROUP BY no_w_id, no_d_id) x WHERE span <> n`},
	{"3.3.2.4 sum(O_OL_CNT) = count(ORDER-LINE)",
		`SELECT COUNT(*) FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS s FROM orders GROUP BY o_w_id, o_d_id) o
		 JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS c FROM order_line GROUP BY ol_w_id, ol_d_id) l
		 ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id WHERE o.s <> l.c`},
	{"3.3.2.5 O_CARRIER_ID is NULL exactly for orders in NEW-ORDER",
		`SELECT COUNT(*) FROM orders o WHERE (o.o_carrier_id IS NULL) <>
		 EXISTS (SELECT 1 FROM new_order n WHERE n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id)`},
	{"3.3.2.6 O_OL_CNT = the order's ORDER-LINE rows",
		`SELECT COUNT(*) FROM orders o WHERE o.o_ol_cnt <>
		 (SELECT COUNT(*) FROM order_line l WHERE l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id)`},
	{"3.3.2.7 OL_DELIVERY_D is NULL exactly when O_CARRIER_ID is",
		`SELECT COUNT(*) FROM orders o JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
		 WHERE (o.o_carrier_id IS NULL) <> (l.ol_delivery_d IS NULL)`},
	{"3.3.2.8 W_YTD = sum(H_AMOUNT)",
		`SELECT COUNT(*) FROM warehouse w WHERE w.w_ytd <> (SELECT SUM(h.h_amount) FROM history h WHERE h.h_w_id = w.w_id)`},
	{"3.3.2.9 D_YTD = sum(H_AMOUNT)",
		`SELECT COUNT(*) FROM district d WHERE d.d_ytd <> (SELECT SUM(h.h_amount) FROM history h WHERE h.h_w_id = d.d_w_id AND h.h_d_id = d.d_id)`},
	{"3.3.2.10 C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)",
		`SELECT COUNT(*) FROM customer c
		 LEFT JOIN (SELECT o.o_w_id, o.o_d_id, o.o_c_id, SUM(l.ol_amount) AS s FROM orders o
		   JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
		   WHERE l.ol_delivery_d IS NOT NULL GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) dl
		   ON dl.o_w_id = c.c_w_id AND dl.o_d_id = c.c_d_id AND dl.o_c_id = c.c_id
		 LEFT JOIN (SELECT h_c_w_id, h_c_d_id, h_c_id, SUM(h_amount) AS s FROM history GROUP BY h_c_w_id, h_c_d_id, h_c_id) hs
		   ON hs.h_c_w_id = c.c_w_id AND hs.h_c_d_id = c.c_d_id AND hs.h_c_id = c.c_id
		 WHERE c.c_balance <> COALESCE(dl.s, 0) - COALESCE(hs.s, 0)`},
	{"3.3.2.12 C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT)",
		`SELECT COUNT(*) FROM customer c
		 LEFT JOIN (SELECT o.o_w_id, o.o_d_id, o.o_c_id, SUM(l.ol_amount) AS s FROM orders o
		   JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
		   WHERE l.ol_delivery_d IS NOT NULL GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) dl
		   ON dl.o_w_id = c.c_w_id AND dl.o_d_id = c.c_d_id AND dl.o_c_id = c.c_id
		 WHERE c.c_balance + c.c_ytd_payment <> COALESCE(dl.s, 0)`},
}

// Check runs the consistency conditions and prints each with the number of
// rows that violate it. It returns an error if any does.
func Check(ctx context.Context, cfg Config, out io.Writer) error {
	db, err := open(ctx, cfg, cfg.Database, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	failed := 0
	for _, c := range consistencies {
		begin := time.Now()
		var bad int64
		if err := db.QueryRowContext(ctx, c.query).Scan(&bad); err != nil {
			fmt.Fprintf(out, "%-62s error: %v\n", c.name, err)
			failed++
			continue
		}
		status := "ok"
		if bad != 0 {
			status = fmt.Sprintf("FAILED: %d rows violate it", bad)
			failed++
		}
		fmt.Fprintf(out, "%-62s %s (%s)\n", c.name, status, time.Since(begin).Round(time.Millisecond))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d consistency conditions failed", failed, len(consistencies))
	}
	fmt.Fprintf(out, "all %d consistency conditions hold\n", len(consistencies))
	return nil
}
