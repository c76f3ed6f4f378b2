package integration

import (
	"strconv"
	"strings"
	"testing"
)

// TestAnalyzeTableSurvivesRestart: ANALYZE TABLE answers MySQL's result
// set through a real client; the statistics it stores are read by a new
// session and, after the process restarts on the same data directory,
// by the restarted node (TABLE_ROWS, CARDINALITY, and the plan: the
// hash join builds the smaller, filtered table only with statistics).
func TestAnalyzeTableSurvivesRestart(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE st",
		"CREATE TABLE st.big (id INT PRIMARY KEY, k INT, KEY k (k))",
		"CREATE TABLE st.small (id INT PRIMARY KEY, tag VARCHAR(10))")
	var big, small strings.Builder
	for i := 0; i < 400; i++ {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString("(" + strconv.Itoa(i) + "," + strconv.Itoa(i%40) + ")")
	}
	for i := 0; i < 40; i++ {
		if i > 0 {
			small.WriteString(",")
		}
		small.WriteString("(" + strconv.Itoa(i) + ",'t" + strconv.Itoa(i%4) + "')")
	}
	mustExec(t, admin, "INSERT INTO st.big VALUES "+big.String(), "INSERT INTO st.small VALUES "+small.String())
	const join = "EXPLAIN SELECT count(*) FROM st.big, st.small WHERE big.k = small.id AND small.tag = 't1'"
	before := strings.Join(queryStrings(t, admin, join), "\n")

	rows, err := admin.Query("ANALYZE TABLE st.big, st.small, st.nosuch")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	if strings.Join(cols, ",") != "Table,Op,Msg_type,Msg_text" {
		t.Fatalf("columns %v", cols)
	}
	var got []string
	for rows.Next() {
		var tb, op, typ, text string
		if err := rows.Scan(&tb, &op, &typ, &text); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{tb, op, typ, text}, "|"))
	}
	rows.Close()
	want := []string{"st.big|analyze|status|OK", "st.small|analyze|status|OK",
		"st.nosuch|analyze|Error|Table 'st.nosuch' doesn't exist", "st.nosuch|analyze|status|Operation failed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ANALYZE TABLE answered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	check := func(when string) {
		t.Helper()
		db := n.DB(t, "st")
		defer db.Close()
		if r := queryStrings(t, db, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'st' ORDER BY TABLE_NAME"); strings.Join(r, ",") != "400,40" {
			t.Fatalf("%s: TABLE_ROWS %v, want 400,40", when, r)
		}
		if r := queryStrings(t, db, "SELECT CARDINALITY FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'st' AND TABLE_NAME = 'big' ORDER BY INDEX_NAME"); strings.Join(r, ",") != "40,400" {
			t.Fatalf("%s: CARDINALITY %v, want 40,400", when, r)
		}
		after := strings.Join(queryStrings(t, db, join), "\n")
		if after == before || !strings.Contains(after, "estRows=") {
			t.Fatalf("%s: the plan did not use the statistics:\n%s", when, after)
		}
		if r := queryStrings(t, db, "SELECT count(*) FROM big, small WHERE big.k = small.id AND small.tag = 't1'"); strings.Join(r, ",") != "100" {
			t.Fatalf("%s: count %v, want 100", when, r)
		}
	}
	check("new session")
	admin.Close()
	n.Stop()
	n.Start()
	check("after a restart")

	// DROP TABLE drops them.
	db := n.DB(t, "st")
	mustExec(t, db, "DROP TABLE small", "CREATE TABLE small (id INT PRIMARY KEY, tag VARCHAR(10))")
	if r := queryStrings(t, db, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'st' AND TABLE_NAME = 'small'"); strings.Join(r, ",") != "0" {
		t.Fatalf("TABLE_ROWS of a new table %v, want 0", r)
	}
}
