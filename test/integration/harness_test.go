package integration

import (
	"net"
	"strings"
	"testing"
)

// TestStartRetriesTakenPort: when another process takes a port between the
// harness choosing it and the node binding it, the node starts on others.
func TestStartRetriesTakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	pickAddr = func(t testing.TB) string {
		calls++
		if calls == 2 { // the first node's RESP address
			return taken.Addr().String()
		}
		return freeAddr(t)
	}
	defer func() { pickAddr = freeAddr }()

	n := StartNode(t)
	// Four addresses per attempt: the first attempt fails on the taken
	// port; a later one may also lose a free port to another test's
	// process between choosing it and binding it, and is retried too.
	if calls < 8 || calls%4 != 0 {
		t.Fatalf("the harness chose %d addresses, want two or more attempts of 4", calls)
	}
	if n.RESPAddr == taken.Addr().String() {
		t.Fatalf("node kept the taken address %s", n.RESPAddr)
	}
	if got := tail(n.LogPath, 100); !strings.Contains(got, "address already in use") {
		t.Fatalf("the first attempt did not fail on the taken port; log:\n%s", got)
	}
	var one int
	if err := n.DB(t, "").QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}
