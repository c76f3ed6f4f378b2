package sql

import "testing"

func TestRedactKeys(t *testing.T) {
	for in, want := range map[string]string{
		`client: transaction aborted: txn start=5 already committed at 7 on key "t\x80\x00\x00\x00\x00\x00\x00\x01_r\x80"`: `client: transaction aborted: txn start=5 already committed at 7 on key <key>`,
		`nothing "plain" here`: `nothing "plain" here`,
	} {
		if got := redactKeys(in); got != want {
			t.Errorf("redactKeys(%q) = %q", in, got)
		}
	}
}
