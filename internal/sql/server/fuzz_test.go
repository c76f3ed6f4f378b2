package server

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// bytesConn is a net.Conn that reads a fixed input and discards writes.
type bytesConn struct {
	r io.Reader
	net.Conn
}

func (c *bytesConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *bytesConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *bytesConn) Close() error                     { return nil }
func (c *bytesConn) SetDeadline(time.Time) error      { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bytesConn) SetWriteDeadline(time.Time) error { return nil }
func (c *bytesConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *bytesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// FuzzPacketReader: the packet reader in front of the protocol library
// (clientConn) never panics on any byte stream, hands on a stream of
// well-formed packets whatever the read sizes, and every placeholder it
// substitutes for a prepared statement maps back to the statement's text.
func FuzzPacketReader(f *testing.F) {
	f.Add(append(packet(0, "\x03SELECT 1"), packet(0, "\x16SELECT ? FOR SHARE")...), uint8(7))
	f.Add(append(packet(1, "\x16handshake"), packet(0, "\x17\x01\x00\x00\x00\x01")...), uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0x00, 0x16}, uint8(3))
	f.Add(packet(0, ""), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		c := newClientConn(&bytesConn{r: bytes.NewReader(data)}, 0)
		var out []byte
		buf := make([]byte, int(chunk)%64+1)
		for {
			n, err := c.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		// The output is whole packets; prepares carry placeholders.
		placeholders := 0
		for rest := out; len(rest) > 0; {
			if len(rest) < 4 {
				t.Fatalf("trailing partial header %x", rest)
			}
			n := int(rest[0]) | int(rest[1])<<8 | int(rest[2])<<16
			if len(rest) < 4+n {
				t.Fatalf("packet of %d bytes with %d left", n, len(rest)-4)
			}
			body := rest[4 : 4+n]
			if rest[3] == 0 && n > 0 && body[0] == comStmtPrepare {
				if !strings.HasPrefix(string(body[1:]), placeholderVerb) {
					t.Fatalf("prepare not rewritten: %q", body)
				}
				placeholders++
			}
			rest = rest[4+n:]
		}
		for i := 0; i < placeholders; i++ {
			if _, ok := c.originalQuery(placeholderVerb + strconv.Itoa(i)); !ok {
				t.Fatalf("placeholder %d does not map back", i)
			}
		}
	})
}

func panicCount(t *testing.T) float64 {
	var m dto.Metric
	if err := metricPanics.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// FuzzCommands: after a real login, any command packet, including the
// prepared-statement commands whose parameters this package decodes, gets
// an answer or a closed connection, never a panic, and the server keeps
// serving other clients.
func FuzzCommands(f *testing.F) {
	ts := startDefaultServer(f)
	f.Add([]byte("\x03SELECT 1"), []byte("\x16SELECT ?, ?"))
	f.Add([]byte{0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0x08, 0x00, 0x08, 0x00, 1, 2, 3}, []byte{0x16, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '?'})
	f.Add([]byte{0x18, 1, 0, 0, 0, 0, 0, 'x'}, []byte{0x1c, 1, 0, 0, 0, 5, 0, 0, 0})
	f.Add([]byte{0x11, 'r', 'o', 'o', 't', 0}, []byte{0x02, 't', 'e', 's', 't'})
	f.Fuzz(func(t *testing.T, first, second []byte) {
		before := panicCount(t)
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		login(t, c)
		// A prepare first, so that executes may find a statement.
		writePacket(t, c, 0, append([]byte{0x16}, "SELECT ?, ?"...))
		drainPrepareOK(t, c, 2)
		for _, p := range [][]byte{first, second} {
			if len(p) == 0 || len(p) > 1<<16 {
				continue
			}
			hdr := []byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 0}
			if _, err := c.Write(append(hdr, p...)); err != nil {
				break
			}
			// Read whatever answer comes, briefly.
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			io.Copy(io.Discard, c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
		}
		if after := panicCount(t); after != before {
			t.Fatalf("commands %x, %x panicked the connection's goroutine", first, second)
		}
	})
}
