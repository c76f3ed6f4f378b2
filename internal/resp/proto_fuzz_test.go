package resp

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"testing/iotest"
)

const fuzzMaxBulk = 32

// fuzzRead reads every command of data from rd and checks the Reader's
// memory promises on the way: the buffer never exceeds twice the input (or
// its initial size), and the arguments never hold more bytes than were sent.
func fuzzRead(t *testing.T, data []byte, r *Reader, buffered bool) ([][][]byte, string) {
	t.Helper()
	var cmds [][][]byte
	total := 0
	for {
		args, err := r.ReadCommand()
		if limit := max(readBufSize, 2*len(data)); len(r.buf) > limit {
			t.Fatalf("buffer of %d bytes for %d bytes of input", len(r.buf), len(data))
		}
		if err != nil {
			return cmds, err.Error()
		}
		if len(args) == 0 {
			t.Fatal("a command without arguments")
		}
		cmd := make([][]byte, len(args))
		for i, a := range args {
			if len(a) > max(fuzzMaxBulk, maxLine) {
				t.Fatalf("argument of %d bytes: above both the bulk and the line limit", len(a))
			}
			total += len(a)
			cmd[i] = bytes.Clone(a)
		}
		if total > len(data) {
			t.Fatalf("%d argument bytes out of %d bytes of input", total, len(data))
		}
		cmds = append(cmds, cmd)
		if buffered {
			r.Buffered()
		}
	}
}

// FuzzReadCommand: the Reader never panics, keeps to its memory bounds,
// parses the same commands and reports the same error however the input is
// split into reads (and whether Buffered looks ahead), and what it parses
// survives a round trip through the multibulk encoding.
func FuzzReadCommand(f *testing.F) {
	for _, tc := range readerCases {
		if len(tc.in) < 1000 {
			f.Add([]byte(tc.in))
		}
	}
	for _, tc := range errorCases {
		if len(tc.in) < 1000 {
			f.Add([]byte(tc.in))
		}
	}
	f.Add([]byte(pipeline))
	f.Add([]byte("*2\r\n$4\r\nECHO\r\n$33\r\n" + string(make([]byte, 33)) + "\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		unauth := data[len(data)-1]&1 == 1
		newReader := func(rd interface{ Read([]byte) (int, error) }) *Reader {
			r := NewReader(rd, fuzzMaxBulk)
			r.SetUnauthenticated(unauth)
			return r
		}
		whole, wholeErr := fuzzRead(t, data, newReader(bytes.NewReader(data)), false)
		bytewise, byteErr := fuzzRead(t, data, newReader(iotest.OneByteReader(bytes.NewReader(data))), true)
		cut := int(data[0]) % len(data)
		split, splitErr := fuzzRead(t, data, newReader(&chunkReader{chunks: [][]byte{data[:cut:cut], data[cut:]}}), cut%2 == 0)
		if fmt.Sprint(whole) != fmt.Sprint(bytewise) || wholeErr != byteErr {
			t.Fatalf("whole: %q %s\none byte at a time: %q %s", whole, wholeErr, bytewise, byteErr)
		}
		if fmt.Sprint(whole) != fmt.Sprint(split) || wholeErr != splitErr {
			t.Fatalf("whole: %q %s\nsplit at %d: %q %s", whole, wholeErr, cut, split, splitErr)
		}

		// Round trip: the commands, encoded as multibulk, parse back the same
		// (within the bulk limit the first parse enforced on multibulk only).
		var enc bytes.Buffer
		for _, cmd := range whole {
			enc.WriteString("*" + strconv.Itoa(len(cmd)) + "\r\n")
			for _, a := range cmd {
				enc.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
				enc.Write(a)
				enc.WriteString("\r\n")
			}
		}
		again, againErr := fuzzRead(t, enc.Bytes(), NewReader(bytes.NewReader(enc.Bytes()), maxLine), false)
		if againErr != "EOF" || fmt.Sprint(again) != fmt.Sprint(whole) {
			t.Fatalf("round trip: %q %s, want %q", again, againErr, whole)
		}
	})
}
