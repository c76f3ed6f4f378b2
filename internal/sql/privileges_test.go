package sql

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestPrivileges runs the scripts in testdata/privileges: accounts are
// created and granted privileges as root, then statements run as those
// accounts, printing their rows or the error MySQL would give.
//
//	exec [user=U] [host=H]    statements, as U from H (root from 127.0.0.1 by default); "ok" or the error
//	query [user=U] [host=H]   one statement; its rows
//	reconnect user=U [host=H] a new session for U (default roles active again)
//
// Each (user, host) keeps one session through the script, so SET ROLE and
// USE last until a reconnect.
func TestPrivileges(t *testing.T) {
	datadriven.Walk(t, "testdata/privileges", func(t *testing.T, path string) {
		e := newTestEngine(t)
		ctx := context.Background()
		sessions := map[string]*Session{}
		session := func(d *datadriven.TestData, fresh bool) *Session {
			user, host := "root", "127.0.0.1"
			if d.HasArg("user") {
				d.ScanArgs(t, "user", &user)
			}
			if d.HasArg("host") {
				d.ScanArgs(t, "host", &host)
			}
			k := user + "@" + host
			if s := sessions[k]; s != nil && !fresh {
				return s
			} else if s != nil {
				s.Close()
			}
			s := e.NewSession(user, host)
			s.SetConnInfo(true, "", "")
			sessions[k] = s
			return s
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "reconnect":
				session(d, true)
				return "ok\n"
			case "exec":
				if _, err := session(d, false).Execute(ctx, d.Input); err != nil {
					return "error: " + err.Error() + "\n"
				}
				return "ok\n"
			case "query":
				rs, err := session(d, false).Execute(ctx, d.Input)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				out := rowsText(rs[len(rs)-1].Rows)
				if out == "" {
					return "(no rows)\n"
				}
				return strings.TrimRight(out, "\n") + "\n"
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	})
}
