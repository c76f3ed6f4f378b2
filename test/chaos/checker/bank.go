package checker

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/strata-db/strata/test/chaos/history"
)

// Bank operations: f "transfer" with value BankTransfer, f "read" with
// value (on ok) a BankRead: every account's balance, read in one
// transaction.
type BankTransfer struct {
	From   int64 `json:"from"`
	To     int64 `json:"to"`
	Amount int64 `json:"amount"`
}

// BankRead maps an account id (as a decimal string, JSON's only map key) to
// its balance.
type BankRead map[string]int64

// BankOptions describe the bank the workload set up.
type BankOptions struct {
	Accounts      int   // accounts 0..Accounts-1
	Total         int64 // sum of all balances
	AllowNegative bool
}

// CheckBank checks that every ok read saw every account, balances summing to
// the total, none negative unless allowed. A wrong sum is read skew or a
// lost update; a missing account is a lost (or phantom) row.
func CheckBank(ops []history.Op, opts BankOptions) *Result {
	res := newResult("bank")
	for _, p := range history.Pairs(ops) {
		res.Counts[p.Invoke.F+" "+p.Complete.Type]++
		if p.Invoke.F != "read" || p.Complete.Type != history.OK {
			continue
		}
		var r BankRead
		if err := json.Unmarshal(p.Complete.Value, &r); err != nil {
			res.add("malformed", true, "index %d: unreadable read %s: %v", p.Complete.Index, p.Complete.Value, err)
			continue
		}
		var sum int64
		var ids []string
		for id, bal := range r {
			sum += bal
			ids = append(ids, id)
			if bal < 0 && !opts.AllowNegative {
				res.add("negative-balance", true, "index %d (process %d, node %s): account %s has balance %d: %s",
					p.Complete.Index, p.Complete.Process, p.Complete.Node, id, bal, p.Complete.Value)
			}
		}
		sort.Strings(ids)
		for i := 0; i < opts.Accounts; i++ {
			if _, ok := r[fmt.Sprint(i)]; !ok {
				res.add("missing-account", true, "index %d (process %d, node %s): account %d missing from %s",
					p.Complete.Index, p.Complete.Process, p.Complete.Node, i, p.Complete.Value)
			}
		}
		if len(ids) > opts.Accounts {
			res.add("unexpected-account", true, "index %d: %d accounts in %s, want %d", p.Complete.Index, len(ids), p.Complete.Value, opts.Accounts)
		}
		if sum != opts.Total {
			res.add("wrong-total", true, "index %d (process %d, node %s): balances sum to %d, want %d: %s",
				p.Complete.Index, p.Complete.Process, p.Complete.Node, sum, opts.Total, p.Complete.Value)
		}
		res.Counts["reads checked"]++
	}
	if res.Counts["reads checked"] == 0 && res.Verdict == Valid {
		res.Verdict = Unknown
		res.note("no read succeeded: nothing to check")
	}
	return res
}
