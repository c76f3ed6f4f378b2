package server

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
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
// TLS. clientConn terminates TLS itself, below the packet parsing above,
// so that prepares can still be rewritten on an encrypted connection: the
// protocol library is given no TLS configuration, clientConn sets the SSL
// capability in the server's greeting, takes the client's SSLRequest out
// of the stream, runs the TLS handshake on the socket and from then on
// reads and writes through it. The library sees the client's full
// handshake response (with CLIENT_SSL, so it treats the connection as
// secure) as if it were the first.
//
// Sequence numbers. Packets of the handshake carry sequence numbers the
// library checks and sets. Each packet clientConn consumes (the
// SSLRequest) or injects (the caching_sha2_password exchange of auth.go,
// writeAuthPacket) shifts the client's numbering against the library's
// by one, so until authentication ends clientConn renumbers packets in
// both directions by seqShift.
//
// Prepare responses. The library writes the answer to COM_STMT_PREPARE
// (an OK, then a definition packet per parameter and per column, each
// header and body a write of its own) straight to the socket, where every
// other command's answer goes through a buffer it flushes once. A prepare
// of a nine-column insert was some forty write system calls. clientConn
// collects the writes of a prepare's answer and sends them in one write
// when the library next reads from the client (it has answered by then)
// or when they outgrow coalesceLimit. The library ends a connection only
// after a failed read (nothing is held back then: the read flushed first)
// or a failed write.
// go-sql-driver prepares every query it sends with arguments (unless told
// to interpolate them), so this is on the path of any such workload.
//
// The client-to-server stream is a sequence of packets (4-byte header:
// 3-byte little-endian length, sequence number). A packet with sequence
// number 0 starts a command; its first payload byte is the command code.
// The server never enables compression, which would require revisiting
// this type.

const (
	comQuery         = 0x03
	comProcessKill   = 0x0c
	comStmtPrepare   = 0x16
	comStmtExecute   = 0x17
	maxPacketPayload = 1<<24 - 1
	placeholderVerb  = "SELECT "

	// retainedBufferLimit is the largest packet buffer kept between packets.
	retainedBufferLimit = 1 << 20

	// coalesceLimit bounds the bytes of a prepare's answer held back
	// before they are written.
	coalesceLimit = 64 << 10
)

type clientConn struct {
	net.Conn
	sock net.Conn      // where packets are written: the socket, or its TLS layer
	poll *pollReader   // the socket's reader (pollread.go)
	in   *bufio.Reader // over poll, or over the TLS layer

	// TLS (see above): tlsConfig nil offers none; tlsConn is set once
	// the client started it.
	tlsConfig *tls.Config
	tlsConn   *tls.Conn

	// Handshake renumbering: seqShift is added to the library's sequence
	// numbers on the way out and taken from the client's on the way in;
	// nextSeq is the client's numbering of the next packet; greeting
	// tracks the first packet's body, whose capability flags get SSL.
	seqShift byte
	nextSeq  byte
	greeting bool
	wBodyPos int

	buf []byte // current packet as returned to the reader
	out []byte // unread rest of buf

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

	// coalesce is set while the library answers a COM_STMT_PREPARE:
	// writes go to pendingOut until the next read (see above).
	coalesce   bool
	pendingOut []byte

	mu      sync.Mutex
	next    uint64            // number of the next placeholder
	pending map[uint64]string // placeholder number -> original statement text
}

// newClientConn wraps c; handshakeTimeout <= 0 means no handshake deadline.
func newClientConn(c net.Conn, handshakeTimeout time.Duration) *clientConn {
	if handshakeTimeout > 0 {
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	}
	poll := newPollReader(c)
	return &clientConn{Conn: c, sock: c, poll: poll, in: bufio.NewReaderSize(poll, 16<<10), pending: map[uint64]string{}, greeting: true}
}

// Write passes b to the client. Before authentication completes it also
// follows the server's packets to renumber them, to offer TLS in the
// greeting and to notice the OK that ends the handshake.
func (p *clientConn) Write(b []byte) (int, error) {
	if !p.authenticated {
		out := append([]byte(nil), b...)
		p.watchHandshake(out)
		if _, err := p.sock.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if p.coalesce {
		if len(p.pendingOut)+len(b) <= coalesceLimit {
			p.pendingOut = append(p.pendingOut, b...)
			return len(b), nil
		}
		if err := p.flushPending(); err != nil {
			return 0, err
		}
	}
	return p.sock.Write(b)
}

// flushPending writes the held-back bytes of a prepare's answer.
func (p *clientConn) flushPending() error {
	if len(p.pendingOut) == 0 {
		return nil
	}
	_, err := p.sock.Write(p.pendingOut)
	if cap(p.pendingOut) > coalesceLimit {
		p.pendingOut = nil
	} else {
		p.pendingOut = p.pendingOut[:0]
	}
	return err
}

// greetingCapOffset is the offset in the greeting's body of the second
// byte of the capability flags, which holds CLIENT_SSL (0x0800): protocol
// version, server version and its NUL, connection id, 8 bytes of auth
// data and a filler byte come first.
var greetingCapOffset = 1 + len(ServerVersion) + 1 + 4 + 8 + 1 + 1

const clientSSLBit = 0x08 // CLIENT_SSL in the capability flags' second byte

// watchHandshake parses the server's packets in b (the library writes a
// header and a body as separate calls), renumbering them and setting
// CLIENT_SSL in the greeting when TLS is offered. During the handshake the
// server sends the greeting (0x0a), maybe an auth-switch request (0xfe)
// or more auth data (0x01), and then OK (0x00) or an error (0xff); no
// earlier packet starts with 0x00.
func (p *clientConn) watchHandshake(b []byte) {
	for len(b) > 0 && !p.authenticated {
		if p.wHeaderLen < 4 {
			n := min(len(b), 4-p.wHeaderLen)
			if j := 3 - p.wHeaderLen; j < n {
				b[j] += p.seqShift
				p.nextSeq = b[j] + 1
			}
			copy(p.wHeader[p.wHeaderLen:], b[:n])
			p.wHeaderLen += n
			b = b[n:]
			if p.wHeaderLen == 4 {
				p.wBodyLeft = int(p.wHeader[0]) | int(p.wHeader[1])<<8 | int(p.wHeader[2])<<16
				p.wBodyStarted = false
				p.wBodyPos = 0
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
		if p.greeting && p.tlsConfig != nil && p.wBodyPos <= greetingCapOffset && greetingCapOffset < p.wBodyPos+n {
			b[greetingCapOffset-p.wBodyPos] |= clientSSLBit
		}
		p.wBodyPos += n
		p.wBodyLeft -= n
		b = b[n:]
		if p.wBodyLeft == 0 {
			p.wHeaderLen = 0
			p.greeting = false
		}
	}
}

// writeAuthPacket sends a packet of the handshake that the protocol
// library does not know about (auth.go's caching_sha2_password
// exchange) and shifts the numbering accordingly. It is called on the
// connection's goroutine, between the library's packets.
func (p *clientConn) writeAuthPacket(payload []byte) error {
	pkt := make([]byte, 4+len(payload))
	pkt[0], pkt[1], pkt[2], pkt[3] = byte(len(payload)), byte(len(payload)>>8), byte(len(payload)>>16), p.nextSeq
	copy(pkt[4:], payload)
	p.nextSeq++
	p.seqShift++
	_, err := p.sock.Write(pkt)
	return err
}

// startTLS runs the server side of a TLS handshake on the socket after
// the client's SSLRequest; later packets go through it.
func (p *clientConn) startTLS() error {
	// The client may have sent its ClientHello right behind the
	// SSLRequest: the TLS layer reads through p.in, which holds it.
	c := tls.Server(bufferedConn{Conn: p.Conn, r: p.in}, p.tlsConfig)
	if err := c.Handshake(); err != nil {
		return err
	}
	p.tlsConn, p.sock = c, c
	p.in = bufio.NewReaderSize(c, 16<<10)
	return nil
}

// bufferedConn is a socket read through a reader that may already hold
// some of its bytes.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// TLSState returns the connection's TLS state, nil for plaintext.
func (p *clientConn) TLSState() *tls.ConnectionState {
	if p.tlsConn == nil {
		return nil
	}
	st := p.tlsConn.ConnectionState()
	return &st
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
	// The library reads the next packet only once it has answered the
	// command before it: a prepare's answer is complete.
	p.coalesce = false
	if err := p.flushPending(); err != nil {
		return err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(p.in, hdr[:]); err != nil {
		return err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if !p.authenticated {
		p.nextSeq = hdr[3] + 1
		if p.tlsConfig != nil && p.tlsConn == nil && hdr[3] == 1 && n == 32 {
			// An SSLRequest (capability flags with CLIENT_SSL, max
			// packet size, charset, 23 zero bytes) is the short form of
			// the handshake response; the full one follows over TLS.
			var req [32]byte
			if _, err := io.ReadFull(p.in, req[:]); err != nil {
				return err
			}
			if req[1]&clientSSLBit == 0 {
				return errors.New("a handshake response too short to hold a user name")
			}
			if err := p.startTLS(); err != nil {
				return err
			}
			p.seqShift++
			return p.readPacket()
		}
		hdr[3] -= p.seqShift
	}
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
			p.coalesce = p.authenticated
		case comStmtExecute:
			// Payload: command, statement id (4 bytes), flags.
			p.execCursor = n < 6 || p.buf[9] != 0
		case comProcessKill:
			// COM_PROCESS_KILL (deprecated, still sent by PyMySQL's
			// kill()): the library does not know it; it is KILL id as a
			// query, answered the same way (OK or an error).
			if n == 5 {
				p.rewriteKill(binary.LittleEndian.Uint32(p.buf[5:9]))
			}
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

// rewriteKill replaces the current packet by the COM_QUERY "KILL id".
func (p *clientConn) rewriteKill(id uint32) {
	p.buf = commandPacket(strconv.AppendUint(append(append(p.buf[:4], comQuery), "KILL "...), uint64(id), 10))
}

// commandPacket fills in the header of b, a command packet (sequence
// number 0) whose payload follows 4 bytes left for it, and returns b.
func commandPacket(b []byte) []byte {
	size := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(size), byte(size>>8), byte(size>>16), 0
	return b
}

// rewritePrepare replaces the current packet by a COM_STMT_PREPARE of a
// numbered placeholder and remembers the original text under that number.
func (p *clientConn) rewritePrepare(query string) {
	p.mu.Lock()
	id := p.next
	p.next++
	p.pending[id] = query
	p.mu.Unlock()
	p.buf = commandPacket(strconv.AppendUint(append(append(p.buf[:4], comStmtPrepare), placeholderVerb...), id, 10))
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
