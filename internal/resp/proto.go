// The wire codec: Reader parses client commands, Writer encodes replies.
//
// # Requests
//
// A client sends either a multibulk array or an inline line, and the first
// byte of a command decides which (Redis's processInputBuffer does the same):
//
//	*<n>\r\n  then n times  $<len>\r\n<len bytes>\r\n     multibulk ('*' first)
//	SET k "v w"\r\n                                          inline (anything else)
//
// Numbers follow Redis's string2ll: optional '-', no '+', no leading zero,
// no spaces, within int64. A header line ends at the first '\r'; the byte
// after it (normally '\n') is skipped unchecked, and so are the two bytes
// after a bulk's data (normally "\r\n"): Redis checks neither.
// `*0` and any negative count (`*-1`) are skipped without producing a command.
// Bulk data may hold any bytes.
//
// An inline line ends at '\n' (one '\r' before it is dropped) and is split as
// Redis's sdssplitargs splits it: runs of blanks separate arguments; "..." is
// a quoted argument with \n \r \t \b \a \xHH and \<any> escapes; '...' is one
// with only \' escaped; a closing quote must be followed by a blank or the
// end of the line. An empty or all-blank line is skipped. Unlike Redis, a NUL
// byte is an ordinary character (Redis's C strings end the line there).
//
// # Limits and errors
//
// Malformed input yields a *ProtocolError with Redis's wording; the server
// answers "-ERR " + Msg and closes the connection, as Redis does. The stream
// cannot be resynchronized after one, so the error is sticky.
//
//	invalid multibulk length      count not a number, or above 1024*1024 (Redis 7 allows up to 2^31-1)
//	invalid bulk length           length not a number, negative, or above maxBulk
//	command larger than the maximum value size
//	                              all arguments together above maxBulk + 1 MiB
//	expected '$', got 'x'         an array element is not a bulk string ('\r', '\n' print as ' ')
//	too big mbulk count string    more than 64 KiB of a '*' line without its '\r'
//	too big bulk count string     more than 64 KiB of a '$' line without its '\r'
//	too big inline request        more than 64 KiB of an inline line without its '\n'
//	unbalanced quotes in request  an unterminated quote, or a closing quote followed by a non-blank
//	unauthenticated multibulk length / bulk length
//	                              above 10 arguments / 16384 bytes before AUTH (SetUnauthenticated)
//
// The 64 KiB limits are applied to the bytes themselves, not to how they were
// split into reads, so a command parses the same whatever the packet
// boundaries (Redis checks them per read; fed one byte at a time it behaves
// exactly like this Reader).
//
// # Memory
//
// A Reader holds one buffer (16 KiB to start). A command is kept contiguous
// in it and the buffer grows only when it is full of bytes actually received,
// at most doubling, so a header announcing 60 MiB costs memory only as the
// 60 MiB arrive: a slow or lying client holds at most about twice what it
// sent. A buffer grown past 64 KiB is replaced by a small one once the
// command that needed it has been consumed. Steady-state parsing of small
// commands allocates nothing.
//
// # Aliasing
//
// The [][]byte that ReadCommand returns, and every argument in it, point into
// the Reader's buffer and are valid only until the next call of ReadCommand.
// A caller that keeps an argument (a queued MULTI command, a key held across
// commands) must copy it. Each argument's capacity ends at its length, so an
// append to one copies instead of overwriting its neighbour.
//
// # Replies
//
// Writer buffers replies and encodes each type for the connection's protocol
// version: RESP2 by default, RESP3 after HELLO 3 (SetProto). RESP3-only types
// fall back as Redis's addReply* functions do: a map is a flat array of twice
// the length, a set an array, a double a bulk string, a boolean an integer,
// a verbatim string a bulk string, and every null is "_" in RESP3.

package resp

import (
	"io"
	"math"
	"net"
	"strconv"
)

// DefaultMaxBulk is the largest request argument a server accepts by default.
const DefaultMaxBulk = 64 << 20

const (
	// maxMultibulk bounds the argument count of one command.
	maxMultibulk = 1024 * 1024
	// maxLine bounds a header or inline line (Redis's PROTO_INLINE_MAX_SIZE).
	maxLine = 64 << 10
	// Limits before AUTH, as in Redis 7 (authRequired in processMultibulkBuffer).
	unauthMaxMultibulk = 10
	unauthMaxBulk      = 16384

	readBufSize = 16 << 10
	// keepBufSize: a read buffer grown beyond this is dropped after the
	// command that needed it, so an idle connection does not pin a large
	// value's worth of memory.
	keepBufSize = 64 << 10
	// keepArgs: argument slices grown beyond this are dropped likewise.
	keepArgs = 1024
)

// ProtocolError is a malformed request. The server replies "-ERR " + Msg and
// closes the connection (what Redis does). Msg is Redis's wording, e.g.
// "Protocol error: invalid bulk length".
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return e.Msg }

// parseState is where the Reader is within the command it is parsing.
type parseState uint8

const (
	stStart      parseState = iota // before the first byte of a command
	stInline                       // inside an inline line
	stCount                        // inside a "*<n>" line
	stBulkHeader                   // before a "$<len>" line
	stBulkData                     // inside a bulk's data
	stReady                        // a whole command is parsed, not yet returned
)

// commandSlack is how far all arguments of one command together may exceed
// maxBulk.
const commandSlack = 1 << 20

// span locates an argument in the buffer, relative to the command's start.
type span struct{ lo, hi int }

// Reader reads client commands from a connection: RESP multibulk arrays
// ("*<n>\r\n$<len>\r\n...") and inline commands. See the top of this file for
// the framing, limits and aliasing rules. A Reader belongs to one goroutine.
type Reader struct {
	rd      io.Reader
	maxBulk int
	unauth  bool

	// buf[start:end] is unconsumed input: the command being parsed begins at
	// start and is parsed up to pos. Bytes before start belong to commands
	// already returned; they stay in place until the next ReadCommand.
	buf        []byte
	start, pos int
	end        int
	// scanned counts the bytes after pos already searched in vain for the
	// end of the current line, so a slowly arriving line is scanned once.
	scanned int

	state   parseState
	pending int    // multibulk arguments still to come
	bulk    int    // length of the bulk being read
	spans   []span // arguments parsed so far
	args    [][]byte

	perr    *ProtocolError // sticky
	readErr error          // a Read error that came with data, returned once the data is used up
}

// NewReader returns a Reader of commands from r that refuses arguments longer
// than maxBulk bytes (DefaultMaxBulk if maxBulk <= 0).
func NewReader(r io.Reader, maxBulk int) *Reader {
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulk
	}
	return &Reader{rd: r, maxBulk: maxBulk, buf: make([]byte, readBufSize)}
}

// SetUnauthenticated lowers the limits for a connection that has not
// authenticated, as Redis 7 does: at most 10 arguments
// ("Protocol error: unauthenticated multibulk length") of at most 16384
// bytes ("Protocol error: unauthenticated bulk length"). It applies to the
// headers parsed after the call, so call it as soon as AUTH (or RESET)
// has run, before Buffered or the next ReadCommand.
func (r *Reader) SetUnauthenticated(on bool) { r.unauth = on }

// ReadCommand returns the next command's arguments (at least one). They
// alias the Reader's buffer and are valid only until the next ReadCommand.
//
// Errors: a *ProtocolError for malformed input (sticky: every later call
// returns it too); io.EOF when the connection ends between commands,
// io.ErrUnexpectedEOF when it ends inside one; other read errors as the
// connection returned them. After a read error that is not EOF (say a
// deadline), calling again resumes where parsing stopped.
func (r *Reader) ReadCommand() ([][]byte, error) {
	if r.perr != nil {
		return nil, r.perr
	}
	r.release()
	for {
		if r.advance(false) {
			return r.command(), nil
		}
		if r.perr != nil {
			return nil, r.perr
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// Buffered reports whether the next ReadCommand can return without reading
// from the connection: it is the number of bytes read from the connection
// and not yet returned as commands when they hold at least one complete
// command (or malformed input, which ReadCommand reports at once), and 0
// when they hold nothing or only the beginning of a command. A server that
// flushes its replies when Buffered is 0 answers a pipeline with one write
// and never holds replies back waiting for the rest of a command, which is
// when Redis writes replies too.
//
// To find out, Buffered parses the buffered bytes ahead (the work is not
// repeated by ReadCommand); it does not read and does not disturb the
// arguments of the command last returned. A header beyond the
// unauthenticated limits is left for ReadCommand to judge (Buffered returns
// 0): the command last returned may be the AUTH that lifts them.
func (r *Reader) Buffered() int {
	if r.perr == nil {
		r.advance(true)
	}
	if r.perr != nil || r.state == stReady {
		return max(1, r.end-r.start)
	}
	return 0
}

// release is called when the caller is done with the last command: large
// buffers it needed go back to their small size.
func (r *Reader) release() {
	if cap(r.args) > keepArgs {
		r.args = nil
	}
	if cap(r.spans) > keepArgs && r.state == stStart {
		r.spans = nil
	}
	if len(r.buf) > keepBufSize && r.end-r.start <= readBufSize/2 {
		nb := make([]byte, readBufSize)
		r.shiftInto(nb)
	}
}

// shiftInto moves the unconsumed input to the front of nb and makes nb the
// buffer. Spans are relative to start, so they stay valid.
func (r *Reader) shiftInto(nb []byte) {
	copy(nb, r.buf[r.start:r.end])
	r.pos -= r.start
	r.end -= r.start
	r.start = 0
	r.buf = nb
}

// fill reads once from the connection into the buffer, compacting or
// growing it first if it is full.
func (r *Reader) fill() error {
	if r.readErr != nil {
		err := r.readErr
		r.readErr = nil
		return r.eof(err)
	}
	if r.start > 0 && (r.start == r.end || len(r.buf)-r.end < len(r.buf)/4) {
		r.shiftInto(r.buf)
	}
	if r.end == len(r.buf) {
		// Full of one partial command: grow, at most doubling, so memory
		// follows the bytes received rather than the lengths announced.
		n := 2 * len(r.buf)
		if r.state == stBulkData {
			if need := r.pos + r.bulk + 2; need > len(r.buf) && need < n {
				n = need
			}
		}
		r.shiftInto(make([]byte, n))
	}
	for range 100 {
		n, err := r.rd.Read(r.buf[r.end:])
		r.end += n
		if err != nil {
			if n > 0 {
				r.readErr = err
				return nil
			}
			return r.eof(err)
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// eof turns an io.EOF inside a command into io.ErrUnexpectedEOF.
func (r *Reader) eof(err error) error {
	if err == io.EOF && (r.end > r.start || r.state != stStart) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fail records a protocol error.
func (r *Reader) fail(msg string) {
	r.perr = &ProtocolError{Msg: "Protocol error: " + msg}
}

// skip ends a command that turned out to have no arguments (*0, *-1, an
// empty inline line).
func (r *Reader) skip() {
	r.start = r.pos
	r.state = stStart
}

// command returns the parsed command and moves on to the next.
func (r *Reader) command() [][]byte {
	base := r.start
	args := r.args[:0]
	for _, s := range r.spans {
		args = append(args, r.buf[base+s.lo:base+s.hi:base+s.hi])
	}
	r.args = args
	r.spans = r.spans[:0]
	r.start = r.pos
	r.state = stStart
	return args
}

// line finds the end of the line that begins at pos: the index of the first
// term byte. For '\r' the byte after it must have arrived too (it is skipped
// unchecked). It fails with tooBig once more than maxLine bytes have arrived
// without term.
func (r *Reader) line(term byte, tooBig string) (int, bool) {
	from := r.pos + r.scanned
	to := min(r.end, r.pos+maxLine+1)
	for i := from; i < to; i++ {
		if r.buf[i] != term {
			continue
		}
		if term == '\r' && i+1 >= r.end {
			r.scanned = i - r.pos
			return 0, false
		}
		r.scanned = 0
		return i, true
	}
	if r.end-r.pos > maxLine {
		r.fail(tooBig)
		return 0, false
	}
	r.scanned = to - r.pos
	return 0, false
}

// advance parses buffered input until a command is complete (true), the
// input runs out or an error is found (false). In lookahead mode (from
// Buffered) it stops before a header that breaks an unauthenticated limit
// instead of failing, because the command before it may yet be AUTH.
func (r *Reader) advance(lookahead bool) bool {
	if r.perr != nil {
		return false // the input is not parsed again after an error: inline lines are decoded in place
	}
	for {
		switch r.state {
		case stReady:
			return true

		case stStart:
			if r.pos == r.end {
				return false
			}
			r.spans = r.spans[:0]
			r.scanned = 0
			if r.buf[r.pos] == '*' {
				r.state = stCount
			} else {
				r.state = stInline
			}

		case stInline:
			nl, ok := r.line('\n', "too big inline request")
			if !ok {
				return false
			}
			end := nl
			if end > r.pos && r.buf[end-1] == '\r' {
				end--
			}
			if !r.splitInline(r.pos, end) {
				r.fail("unbalanced quotes in request")
				return false
			}
			r.pos = nl + 1
			if len(r.spans) == 0 {
				r.skip()
				continue
			}
			r.state = stReady

		case stCount:
			cr, ok := r.line('\r', "too big mbulk count string")
			if !ok {
				return false
			}
			n, ok := parseInt(r.buf[r.pos+1 : cr])
			if !ok || n > maxMultibulk {
				r.fail("invalid multibulk length")
				return false
			}
			if r.unauth && n > unauthMaxMultibulk {
				if !lookahead {
					r.fail("unauthenticated multibulk length")
				}
				return false
			}
			r.pos = cr + 2
			if n <= 0 {
				r.skip()
				continue
			}
			r.pending = int(n)
			r.state = stBulkHeader

		case stBulkHeader:
			cr, ok := r.line('\r', "too big bulk count string")
			if !ok {
				return false
			}
			if c := r.buf[r.pos]; c != '$' {
				if c == '\r' || c == '\n' {
					c = ' ' // Redis blanks line breaks in error replies
				}
				r.fail("expected '$', got '" + string([]byte{c}) + "'")
				return false
			}
			n, ok := parseInt(r.buf[r.pos+1 : cr])
			if !ok || n < 0 || n > int64(r.maxBulk) {
				r.fail("invalid bulk length")
				return false
			}
			if int64(r.pos-r.start)+n > int64(r.maxBulk)+commandSlack {
				// One command may carry one value of the largest size plus
				// keys and small arguments, not many: this bounds the
				// memory a connection can make the server hold.
				r.fail("command larger than the maximum value size")
				return false
			}
			if r.unauth && n > unauthMaxBulk {
				if !lookahead {
					r.fail("unauthenticated bulk length")
				}
				return false
			}
			r.pos = cr + 2
			r.bulk = int(n)
			r.state = stBulkData

		case stBulkData:
			if r.end-r.pos < r.bulk+2 {
				return false
			}
			lo := r.pos - r.start
			r.spans = append(r.spans, span{lo, lo + r.bulk})
			r.pos += r.bulk + 2
			r.pending--
			if r.pending == 0 {
				r.state = stReady
			} else {
				r.state = stBulkHeader
			}
		}
	}
}

// isBlank is C's isspace in the C locale: what separates inline arguments
// and may follow a closing quote.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// splitInline splits the inline line buf[lo:hi] into arguments with Redis's
// sdssplitargs rules, appending their spans. Arguments are decoded in place:
// every input byte yields at most one output byte, so the write position
// never passes the read position. It reports false for unbalanced quotes.
func (r *Reader) splitInline(lo, hi int) bool {
	b := r.buf
	i, o := lo, lo
	for {
		for i < hi && isBlank(b[i]) {
			i++
		}
		if i == hi {
			return true
		}
		argStart := o
		inDouble, inSingle := false, false
	token:
		for {
			switch {
			case inDouble:
				if i == hi {
					return false
				}
				c := b[i]
				if c == '\\' && i+3 < hi && b[i+1] == 'x' {
					h, ok1 := unhex(b[i+2])
					l, ok2 := unhex(b[i+3])
					if ok1 && ok2 {
						b[o] = h<<4 | l
						o++
						i += 4
						continue
					}
				}
				switch {
				case c == '\\' && i+1 < hi:
					e := b[i+1]
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					b[o] = e
					o++
					i += 2
				case c == '"':
					if i+1 < hi && !isBlank(b[i+1]) {
						return false
					}
					i++
					break token
				default:
					b[o] = c
					o++
					i++
				}
			case inSingle:
				if i == hi {
					return false
				}
				c := b[i]
				switch {
				case c == '\\' && i+1 < hi && b[i+1] == '\'':
					b[o] = '\''
					o++
					i += 2
				case c == '\'':
					if i+1 < hi && !isBlank(b[i+1]) {
						return false
					}
					i++
					break token
				default:
					b[o] = c
					o++
					i++
				}
			default:
				if i == hi {
					break token
				}
				c := b[i]
				i++
				switch c {
				case ' ', '\n', '\r', '\t':
					break token
				case '"':
					inDouble = true
				case '\'':
					inSingle = true
				default:
					b[o] = c
					o++
				}
			}
		}
		r.spans = append(r.spans, span{argStart - r.start, o - r.start})
	}
}

// writeBufSize is the Writer's buffer: replies are written out when it fills,
// and a bulk at least this long goes to the connection without being copied.
const writeBufSize = 16 << 10

// Writer writes replies in RESP2 or RESP3 (Proto 2 or 3; default 2), buffered.
// Replies reach the destination when Flush is called or the buffer fills.
// A write error is sticky: later writes are dropped and Flush returns it.
// A Writer belongs to one goroutine.
type Writer struct {
	dst   io.Writer
	buf   []byte
	proto int
	err   error
}

// NewWriter returns a RESP2 Writer to w.
func NewWriter(w io.Writer) *Writer { return newWriterSize(w, writeBufSize) }

// newWriterSize returns a RESP2 Writer to w whose buffer starts at size
// bytes and grows as replies need (up to writeBufSize before it flushes).
// A batched command's Writer holds one short reply: starting it at
// writeBufSize cost a 16 KiB allocation per command.
func newWriterSize(w io.Writer, size int) *Writer {
	return &Writer{dst: w, buf: make([]byte, 0, size), proto: 2}
}

// SetProto selects the protocol version: 3 for RESP3, anything else RESP2.
func (w *Writer) SetProto(v int) {
	if v == 3 {
		w.proto = 3
	} else {
		w.proto = 2
	}
}

// Proto is the protocol version, 2 or 3.
func (w *Writer) Proto() int { return w.proto }

// Buffered is the number of bytes written and not yet flushed.
func (w *Writer) Buffered() int { return len(w.buf) }

// Flush writes the buffered replies to the destination.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.dst.Write(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	w.err = err
	w.buf = w.buf[:0]
	if cap(w.buf) > 4*writeBufSize {
		w.buf = make([]byte, 0, writeBufSize)
	}
	return err
}

// Reset discards unflushed replies and any error and points the writer at
// dst, keeping the protocol version (like bufio.Writer.Reset). The server
// captures a transaction attempt's replies in a bytes.Buffer this way and
// copies them out only when the attempt commits.
func (w *Writer) Reset(dst io.Writer) {
	w.dst = dst
	w.err = nil
	w.buf = w.buf[:0]
}

// done is called after each reply: it writes the buffer out once full, and
// drops it after a write error.
func (w *Writer) done() {
	if w.err != nil {
		w.buf = w.buf[:0]
		return
	}
	if len(w.buf) >= writeBufSize {
		w.Flush()
	}
}

// writeLarge writes the buffer and then b without copying b (one writev on
// a TCP connection).
func (w *Writer) writeLarge(b []byte) {
	if w.err != nil {
		return
	}
	bufs := net.Buffers{w.buf, b}
	total := int64(len(w.buf) + len(b))
	n, err := bufs.WriteTo(w.dst)
	if err == nil && n < total {
		err = io.ErrShortWrite
	}
	w.err = err
	w.buf = w.buf[:0]
}

func (w *Writer) appendHeader(prefix byte, n int64) {
	w.buf = append(w.buf, prefix)
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

// appendLine appends s with '\r' and '\n' replaced by spaces, so that a
// simple string or error cannot break the framing.
func (w *Writer) appendLine(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.buf = append(w.buf, c)
	}
	w.buf = append(w.buf, '\r', '\n')
}

// WriteSimple writes a simple string: +OK.
func (w *Writer) WriteSimple(s string) {
	w.buf = append(w.buf, '+')
	w.appendLine(s)
	w.done()
}

// WriteError writes an error reply. msg starts with the error code
// ("ERR ...", "WRONGTYPE ..."); a leading '-' is not doubled. Line breaks in
// msg become spaces, as in Redis's addReplyErrorFormat.
func (w *Writer) WriteError(msg string) {
	if len(msg) > 0 && msg[0] == '-' {
		msg = msg[1:]
	}
	w.buf = append(w.buf, '-')
	w.appendLine(msg)
	w.done()
}

// WriteInt writes an integer: :n.
func (w *Writer) WriteInt(n int64) {
	w.appendHeader(':', n)
	w.done()
}

// WriteBulk writes a bulk string: $len, the bytes. A nil b is the empty
// string; a missing value is WriteNull.
func (w *Writer) WriteBulk(b []byte) {
	w.appendHeader('$', int64(len(b)))
	if len(b) >= writeBufSize {
		w.writeLarge(b)
	} else {
		w.buf = append(w.buf, b...)
	}
	w.buf = append(w.buf, '\r', '\n')
	w.done()
}

// WriteBulkString writes s as a bulk string.
func (w *Writer) WriteBulkString(s string) {
	w.appendHeader('$', int64(len(s)))
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
	w.done()
}

// WriteNull writes a null: the null bulk string $-1 in RESP2, _ in RESP3.
func (w *Writer) WriteNull() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
	} else {
		w.buf = append(w.buf, "$-1\r\n"...)
	}
	w.done()
}

// WriteNullArray writes a null array: *-1 in RESP2, _ in RESP3.
func (w *Writer) WriteNullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
	} else {
		w.buf = append(w.buf, "*-1\r\n"...)
	}
	w.done()
}

// WriteArrayLen starts an array of n elements, which the caller writes next.
func (w *Writer) WriteArrayLen(n int) {
	w.appendHeader('*', int64(n))
	w.done()
}

// WriteMapLen starts a map of n key/value pairs (2n replies follow): %n in
// RESP3, an array of 2n in RESP2.
func (w *Writer) WriteMapLen(n int) {
	if w.proto == 3 {
		w.appendHeader('%', int64(n))
	} else {
		w.appendHeader('*', 2*int64(n))
	}
	w.done()
}

// WriteSetLen starts a set of n elements: ~n in RESP3, an array in RESP2.
func (w *Writer) WriteSetLen(n int) {
	if w.proto == 3 {
		w.appendHeader('~', int64(n))
	} else {
		w.appendHeader('*', int64(n))
	}
	w.done()
}

// WriteDouble writes a double: ,<repr> in RESP3, a bulk string of the same
// text in RESP2. The text is Redis 7.2's d2string (see AppendDouble).
func (w *Writer) WriteDouble(f float64) {
	var tmp [32]byte
	repr := AppendDouble(tmp[:0], f)
	if w.proto == 3 {
		w.buf = append(w.buf, ',')
	} else {
		w.appendHeader('$', int64(len(repr)))
	}
	w.buf = append(w.buf, repr...)
	w.buf = append(w.buf, '\r', '\n')
	w.done()
}

// WriteBool writes a boolean: #t/#f in RESP3, :1/:0 in RESP2.
func (w *Writer) WriteBool(b bool) {
	switch {
	case w.proto == 3 && b:
		w.buf = append(w.buf, "#t\r\n"...)
	case w.proto == 3:
		w.buf = append(w.buf, "#f\r\n"...)
	case b:
		w.buf = append(w.buf, ":1\r\n"...)
	default:
		w.buf = append(w.buf, ":0\r\n"...)
	}
	w.done()
}

// WriteVerbatim writes a verbatim string: =len\r\n<format>:<s> in RESP3,
// where format is three bytes ("txt" or "mkd"; anything else is sent as
// "txt"), and a bulk string of s in RESP2.
func (w *Writer) WriteVerbatim(format string, s string) {
	if w.proto != 3 {
		w.WriteBulkString(s)
		return
	}
	if len(format) != 3 {
		format = "txt"
	}
	w.appendHeader('=', int64(len(s)+4))
	w.buf = append(w.buf, format...)
	w.buf = append(w.buf, ':')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
	w.done()
}

// WriteRaw writes b, which must be complete, already encoded replies.
func (w *Writer) WriteRaw(b []byte) {
	if len(b) >= writeBufSize {
		w.writeLarge(b)
	} else {
		w.buf = append(w.buf, b...)
	}
	w.done()
}

// AppendDouble appends f formatted as Redis 7.2's d2string does (the text of
// a score, and of every RESP3 double; INCRBYFLOAT formats differently): "nan", "inf",
// "-inf", "0" and "-0"; an integer value within ±2^62 as an integer;
// otherwise the shortest digits that read back as f (Redis uses Grisu), laid
// out as Redis's fpconv_dtoa lays them out: plain when the number has fewer
// than 8 trailing zeros or its decimal point lies within its digits or less
// than 7 places before them, else in exponent form with a signed,
// unpadded exponent (1e+20, 1.5e-7).
func AppendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	case f >= -(1<<62) && f <= 1<<62 && f == math.Trunc(f):
		return strconv.AppendInt(dst, int64(f), 10)
	}

	// Shortest round-trip digits in exponent form: [-]d[.ddd]e±XX.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	var digits [24]byte
	nd := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[nd] = e[i]
			nd++
		}
	}
	exp10, _ := strconv.Atoi(string(e[i+1:])) // the exponent of the first digit
	d := digits[:nd]
	k := exp10 - (nd - 1) // f = d × 10^k
	absExp := exp10
	if absExp < 0 {
		absExp = -absExp
	}

	switch {
	case k >= 0 && absExp < nd+7: // an integer with fewer than 8 trailing zeros
		dst = append(dst, d...)
		for range k {
			dst = append(dst, '0')
		}
		return dst
	case k < 0 && (k > -7 || absExp < 4): // a plain decimal
		point := nd + k // digits before the decimal point
		if point <= 0 {
			dst = append(dst, '0', '.')
			for range -point {
				dst = append(dst, '0')
			}
			return append(dst, d...)
		}
		dst = append(dst, d[:point]...)
		dst = append(dst, '.')
		return append(dst, d[point:]...)
	}
	dst = append(dst, d[0])
	if nd > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	dst = append(dst, 'e')
	if exp10 < 0 {
		dst = append(dst, '-')
	} else {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(absExp), 10)
}
