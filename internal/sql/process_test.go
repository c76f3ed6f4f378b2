package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// KILL QUERY from another session stops a running statement (1317) and
// leaves its session usable; SHOW PROCESSLIST shows the statement while it
// runs. Run with -race, this also checks the statement's state is shared
// safely.
func TestKillQueryStopsStatement(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	var vals []string
	for i := 0; i < 500; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	exec(t, a, "CREATE TABLE big (id INT PRIMARY KEY, v INT)")
	exec(t, a, "INSERT INTO big VALUES "+strings.Join(vals, ","))
	const slow = "SELECT COUNT(*) FROM big x, big y, big z WHERE x.v + y.v + z.v < 0"
	done := async(a, slow)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs, err := b.Execute(context.Background(), "SHOW FULL PROCESSLIST")
		if err != nil {
			t.Fatal(err)
		}
		running := false
		for _, r := range rs[0].Rows {
			if info, _ := r[7].ToString(); info == slow {
				running = true
			}
		}
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement never showed in the process list")
		}
		time.Sleep(10 * time.Millisecond)
	}
	exec(t, b, fmt.Sprintf("KILL QUERY %d", a.ConnectionID()))
	select {
	case err := <-done:
		if sqlCode(err) != sqlerr.ErQueryInterrupted {
			t.Fatalf("killed statement: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the killed statement kept running")
	}
	if v := value(t, a, "SELECT COUNT(*) FROM big"); v != "500" {
		t.Fatal(v)
	}
}
