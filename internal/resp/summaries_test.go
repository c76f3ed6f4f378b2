package resp

import "testing"

func TestEveryCommandHasASummary(t *testing.T) {
	for name, c := range commands {
		if c.summary == "" {
			t.Errorf("command %s has no COMMAND DOCS summary", name)
		}
	}
}
