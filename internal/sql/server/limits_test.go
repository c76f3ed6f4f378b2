package server

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// errCode reads the code of an error packet.
func errPacketCode(t *testing.T, p []byte) uint16 {
	t.Helper()
	if len(p) < 3 || p[0] != 0xff {
		t.Fatalf("expected an error packet, got %q", p)
	}
	return binary.LittleEndian.Uint16(p[1:3])
}

// A prepared statement with more placeholders than the protocol library
// can bind (65535 here, MySQL's limit) is refused at prepare with 1390,
// and the connection goes on: nothing panics in the library when the
// client then executes it.
func TestTooManyPlaceholdersRefused(t *testing.T) {
	ts := startDefaultServer(t)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	login(t, c)
	q := "SELECT ?" + strings.Repeat(",?", 65534)
	writePacket(t, c, 0, append([]byte{0x16}, q...))
	if code := errPacketCode(t, readPacket(t, c)); code != 1390 {
		t.Fatalf("prepare of 65535 placeholders: error %d, want 1390", code)
	}
	// Executing statement 1 (never prepared) is an error, not a panic.
	exec := []byte{0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x00}
	writePacket(t, c, 0, exec)
	expectErrPacket(t, c)
	writePacket(t, c, 0, []byte{0x03, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1'})
	if p := readPacket(t, c); p[0] == 0xff {
		t.Fatalf("connection unusable after the refused prepare: %q", p)
	}
	// The largest statement the library binds safely still works.
	q = "SELECT ?" + strings.Repeat(",?", maxPreparedParams-1)
	writePacket(t, c, 0, append([]byte{0x16}, q...))
	// Skip the rest of the result of SELECT 1 first.
	for {
		p := readPacket(t, c)
		if p[0] == 0x00 && len(p) > 1 && len(p) < 9 || p[0] == 0xfe && len(p) < 9 {
			break
		}
	}
	drainPrepareOK(t, c, maxPreparedParams)
}

// A command larger than max_allowed_packet gets 1153 before it is read and
// its connection is closed; the server serves others as before.
func TestMaxAllowedPacketEnforced(t *testing.T) {
	ts := startServer(t, Config{AllowEmptyRootPassword: true, MaxAllowedPacket: 4096})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	login(t, c)
	big := append([]byte{0x03}, "SELECT '"+strings.Repeat("x", 5000)+"'"...)
	writePacket(t, c, 0, big)
	p := readPacket(t, c)
	if code := errPacketCode(t, p); code != 1153 {
		t.Fatalf("oversized command: error %d, want 1153", code)
	}
	if !strings.Contains(string(p), "max_allowed_packet") {
		t.Fatalf("message %q", p)
	}
	var one [1]byte
	if _, err := c.Read(one[:]); err == nil {
		t.Fatal("the connection stayed open after an oversized command")
	}
	db := ts.openDB(t, "root", "test", "")
	var n int
	if err := db.QueryRow("SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("server unusable: %v", err)
	}
	// A command within the limit is read and answered (by the test
	// backend, which knows no such statement).
	_, err = db.Exec("INSERT " + strings.Repeat(" ", 3000))
	if me := mysqlError(t, err); me.Number == 1153 {
		t.Fatalf("a 3 KB command under a 4 KB limit: %v", err)
	}
}
