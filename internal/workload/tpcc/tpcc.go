// Package tpcc is TPC-C in `strata workload`, like `tiup bench tpcc` and
// `cockroach workload run tpcc`: init loads W warehouses (TPC-C standard
// specification 5.11, clause 4.3.3), run drives the five transactions
// (clause 2) in the spec's mix through a MySQL-protocol driver
// (go-sql-driver, server-side prepared statements) and reports tpmC, the
// efficiency and the latency of each transaction type, and check runs the
// consistency conditions of clause 3.3.2 and reports each.
//
// The same program runs against Strata and against MySQL or MariaDB, so a
// comparison is between servers. Keying and think times (clause 5.2.5) are
// off by default, as in tiup bench, and can be turned on (--wait): with
// them, a warehouse's ten terminals cannot exceed 12.86 tpmC, the figure
// efficiency is relative to.
//
// What differs from the spec, on purpose: terminals are workers (--threads
// of them, spread over the warehouses), the mix is drawn at random with
// the spec's minimum percentages (45/43/4/4/4), Delivery runs in the
// terminal rather than deferred, and StockLevel reads the recent items in
// one query and their stock in another rather than a join. A transaction
// that fails with a deadlock or lock wait timeout (1213, 1205) is run again
// and counted as a retry; any other failure is an error.
package tpcc

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/strata-db/strata/internal/workload"
)

// Config describes a TPC-C database and run.
type Config struct {
	Addr, User, Password, Database string
	Warehouses                     int
	Threads                        int
	Timeout                        time.Duration
	// Wait turns on the spec's keying and think times.
	Wait bool
	// Seed seeds the random generators (worker i uses Seed, i).
	Seed uint64
	// Scale divides the item, customer and order counts (for tests; 0 and
	// 1 mean the spec's sizes). The data is no longer TPC-C's.
	Scale int
}

// Spec constants (clause 4.3.3.1, 2.1.6).
const (
	districtsPerWH      = 10
	maxTpmCPerWarehouse = 12.86
)

// sizes are the table sizes of clause 4.3.3.1, divided by Config.Scale.
type sizes struct {
	items     int // 100,000 items, and stock rows per warehouse
	customers int // 3,000 per district
	orders    int // 3,000 per district
	newFrom   int // orders from 2,101 on are undelivered at load
	lastNames int // 1,000 last names
}

func (c Config) sizes() sizes {
	s := max(c.Scale, 1)
	sz := sizes{items: 100000 / s, customers: 3000 / s, orders: 3000 / s}
	sz.newFrom = sz.orders*7/10 + 1
	sz.lastNames = min(1000, sz.customers)
	return sz
}

// lastName draws a C_LAST at run time: NURand(255, 0, 999) (clause
// 2.5.1.2), or uniform over the names a scaled-down load holds.
func (sz sizes) lastName(r rng) string {
	if sz.lastNames == 1000 {
		return lastName(r.nurand(255, cLastRun, 0, 999))
	}
	return lastName(r.IntN(sz.lastNames))
}

// NURand constants (clause 2.1.6): C for c_last at load (cLoad) and run
// (cRun) must differ as clause 2.1.6.1 says; C for c_id and ol_i_id.
const (
	cLastLoad = 157
	cLastRun  = 223
	cCustomer = 259
	cItem     = 7911
)

// open returns a pool of connections to cfg's server (database may be
// empty).
func open(ctx context.Context, cfg Config, database string, conns int) (*sql.DB, error) {
	mc := workload.MySQLConfig(cfg.User, cfg.Password, cfg.Addr, database, cfg.Timeout, 5*time.Minute)
	mc.InterpolateParams = false
	mc.ParseTime = true
	return workload.OpenMySQL(ctx, mc, conns)
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// rng is a worker's random source with the spec's generators.
type rng struct{ *rand.Rand }

func newRng(seed uint64, stream int) rng {
	return rng{rand.New(rand.NewPCG(seed, uint64(stream)))}
}

// uniform returns an integer in [lo, hi].
func (r rng) uniform(lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// nurand is NURand(A, x, y) of clause 2.1.6.
func (r rng) nurand(a, c, x, y int) int {
	return (((r.uniform(0, a) | r.uniform(x, y)) + c) % (y - x + 1)) + x
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// astring is a random alphanumeric string of length in [lo, hi].
func (r rng) astring(lo, hi int) string {
	b := make([]byte, r.uniform(lo, hi))
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	return string(b)
}

// nstring is a random numeric string of length n.
func (r rng) nstring(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

// data is i_data / s_data: 26-50 characters, 10% holding "ORIGINAL".
func (r rng) data() string {
	s := r.astring(26, 50)
	if r.IntN(10) == 0 {
		p := r.IntN(len(s) - 8)
		s = s[:p] + "ORIGINAL" + s[p+8:]
	}
	return s
}

func (r rng) zip() string { return r.nstring(4) + "11111" }

func (r rng) amount(lo, hi float64) float64 {
	cents := int64(lo*100) + r.Int64N(int64((hi-lo)*100)+1)
	return float64(cents) / 100
}

var syllables = []string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// lastName is C_LAST for a number in 0..999 (clause 4.3.2.3).
func lastName(n int) string {
	return syllables[n/100] + syllables[(n/10)%10] + syllables[n%10]
}

// retryable reports whether err is a conflict the transaction may be run
// again after (deadlock victim, lock wait timeout, write conflict).
func retryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, 1205, 8002, 9007:
			return true
		}
	}
	return false
}
