package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clientConn is the socket of one client as the protocol library sees it.
// It has two jobs the library does not do: it keeps the library's grammar
// away from prepared statements, and it bounds the handshake in time.
//
// Prepared statements. The protocol library parses every COM_STMT_PREPARE with its own MySQL
// grammar before it calls the handler, rejects what that grammar does not
// know (FOR SHARE, NOWAIT, TiDB extensions such as AUTO_RANDOM) and spends
// a full parse per prepare, which go-sql-driver issues for every query with
// arguments. The SQL layer parses the statement anyway, so the library's
// parse is bypassed: clientConn takes the text out of each
// COM_STMT_PREPARE packet and hands the library a placeholder
// ("SELECT <n>") it parses trivially. The handler's ComPrepare maps the
// placeholder back to the original text.
//
// Handshake deadline. A client that connects and then stalls (sends no
// handshake response, or no auth-switch response) would hold its
// goroutine and socket forever. Until the server sends the OK that ends
// authentication, the socket carries a deadline; the OK clears it, and an
// authenticated connection may then idle as long as it likes.
//
// The client-to-server stream is a sequence of packets (4-byte header:
// 3-byte little-endian length, sequence number). A packet with sequence
// number 0 starts a command; its first payload byte is the command code.
// This holds for the whole connection because the server never enables TLS
// or compression; enabling either requires revisiting this type.

const (
	comStmtPrepare   = 0x16
	comStmtExecute   = 0x17
	maxPacketPayload = 1<<24 - 1
	placeholderVerb  = "SELECT "

	// retainedBufferLimit is the largest packet buffer kept between packets.
	retainedBufferLimit = 1 << 20
)

type clientConn struct {
	net.Conn
	in  *bufio.Reader // over the socket's pollReader (pollread.go)
	buf []byte        // current packet as returned to the reader
	out []byte        // unread rest of buf

	// Server-to-client packet tracking, used only until authenticated is
	// set; writes happen on the connection's goroutine.
	authenticated bool
	wHeader       [4]byte
	wHeaderLen    int // header bytes of the current server packet seen
	wBodyLeft     int // body bytes of the current server packet still to come
	wBodyStarted  bool

	// maxPacket bounds a command's payload (max_allowed_packet; 0: no
	// bound). cmdSize is the payload of the current command so far, and
	// cont says the last packet was full, so the next continues it.
	maxPacket int
	cmdSize   int
	cont      bool

	// execCursor tells whether the last COM_STMT_EXECUTE asked for a
	// server-side cursor (a non-zero flags byte, or a packet too short to
	// say), whose rows the protocol library keeps until the client
	// fetches them.
	execCursor bool

	mu      sync.Mutex
	next    uint64            // number of the next placeholder
	pending map[uint64]string // placeholder number -> original statement text
}

// newClientConn wraps c; handshakeTimeout <= 0 means no handshake deadline.
func newClientConn(c net.Conn, handshakeTimeout time.Duration) *clientConn {
	if handshakeTimeout > 0 {
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	}
	return &clientConn{Conn: c, in: bufio.NewReaderSize(newPollReader(c), 16<<10), pending: map[uint64]string{}}
}

// Write passes b to the socket. Before authentication completes it also
// follows the server's packets to notice the OK that ends the handshake.
func (p *clientConn) Write(b []byte) (int, error) {
	if !p.authenticated {
		p.watchHandshake(b)
	}
	return p.Conn.Write(b)
}

// watchHandshake parses the server's packets in b (the library writes a
// header and a body as separate calls). During the handshake the server
// sends the greeting (0x0a), maybe an auth-switch request (0xfe), and then
// OK (0x00) or an error (0xff); no earlier packet starts with 0x00.
func (p *clientConn) watchHandshake(b []byte) {
	for len(b) > 0 && !p.authenticated {
		if p.wHeaderLen < 4 {
			n := copy(p.wHeader[p.wHeaderLen:], b)
			p.wHeaderLen += n
			b = b[n:]
			if p.wHeaderLen == 4 {
				p.wBodyLeft = int(p.wHeader[0]) | int(p.wHeader[1])<<8 | int(p.wHeader[2])<<16
				p.wBodyStarted = false
				if p.wBodyLeft == 0 {
					p.wHeaderLen = 0
				}
			}
			continue
		}
		if !p.wBodyStarted {
			p.wBodyStarted = true
			if b[0] == 0x00 {
				p.authenticated = true
				_ = p.Conn.SetDeadline(time.Time{})
				return
			}
		}
		n := min(len(b), p.wBodyLeft)
		p.wBodyLeft -= n
		b = b[n:]
		if p.wBodyLeft == 0 {
			p.wHeaderLen = 0
		}
	}
}

// Read returns the client's byte stream, one packet at a time, with
// prepare packets rewritten. It blocks until a whole packet has arrived.
func (p *clientConn) Read(b []byte) (int, error) {
	if len(p.out) == 0 {
		if err := p.readPacket(); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

func (p *clientConn) readPacket() error {
	var hdr [4]byte
	if _, err := io.ReadFull(p.in, hdr[:]); err != nil {
		return err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if !p.cont {
		p.cmdSize = 0
	}
	p.cmdSize += n
	p.cont = n == maxPacketPayload
	if p.maxPacket > 0 && p.cmdSize > p.maxPacket && p.authenticated {
		// MySQL answers ER_NET_PACKET_TOO_LARGE and drops the
		// connection; the rest of the command is never read.
		p.writeError(hdr[3]+1, 1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes")
		return errPacketTooLarge
	}
	if cap(p.buf) < 4+n || (cap(p.buf) > retainedBufferLimit && 4+n <= retainedBufferLimit) {
		// Grow for this packet; after a huge one, do not keep its buffer
		// for the rest of the connection.
		p.buf = make([]byte, 4+n, max(4+n, 512))
	}
	p.buf = p.buf[:4+n]
	copy(p.buf, hdr[:])
	if _, err := io.ReadFull(p.in, p.buf[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	// A prepare that spans several packets (16 MiB or more of text) is left
	// to the library: its continuation packets cannot be rewritten alone.
	if seq := hdr[3]; seq == 0 && n > 0 && n < maxPacketPayload {
		switch p.buf[4] {
		case comStmtPrepare:
			p.rewritePrepare(string(p.buf[5:]))
		case comStmtExecute:
			// Payload: command, statement id (4 bytes), flags.
			p.execCursor = n < 6 || p.buf[9] != 0
		}
	}
	p.out = p.buf
	return nil
}

// errPacketTooLarge ends a connection whose command exceeded maxPacket.
var errPacketTooLarge = errors.New("client command larger than max_allowed_packet")

// writeError sends an error packet with sequence number seq straight to
// the socket.
func (p *clientConn) writeError(seq byte, code uint16, state, msg string) {
	body := make([]byte, 0, 9+len(msg))
	body = append(body, 0xff, byte(code), byte(code>>8), '#')
	body = append(body, state...)
	body = append(body, msg...)
	pkt := append([]byte{byte(len(body)), byte(len(body) >> 8), byte(len(body) >> 16), seq}, body...)
	_, _ = p.Conn.Write(pkt)
}

// rewritePrepare replaces the current packet by a COM_STMT_PREPARE of a
// numbered placeholder and remembers the original text under that number.
func (p *clientConn) rewritePrepare(query string) {
	p.mu.Lock()
	id := p.next
	p.next++
	p.pending[id] = query
	p.mu.Unlock()
	payload := strconv.AppendUint(append(append(p.buf[:4], comStmtPrepare), placeholderVerb...), id, 10)
	size := len(payload) - 4
	payload[0], payload[1], payload[2], payload[3] = byte(size), byte(size>>8), byte(size>>16), 0
	p.buf = payload
}

// originalQuery maps a placeholder the library handed to ComPrepare back
// to the client's text. Placeholders numbered below it belong to prepares
// the library answered itself without calling the handler; they are
// dropped. ok is false when query is not a placeholder of this connection.
func (p *clientConn) originalQuery(query string) (string, bool) {
	digits, isPlaceholder := strings.CutPrefix(query, placeholderVerb)
	if !isPlaceholder {
		return "", false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	text, ok := p.pending[id]
	if !ok {
		return "", false
	}
	for pid := range p.pending {
		if pid <= id {
			delete(p.pending, pid)
		}
	}
	return text, true
}
