package raftstore

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestCoalesceDataDriven pins coalesce, the merging of one Ready's
// messages per destination, with testdata/coalesce scripts:
//
//	coalesce
//	app to=<id> [from=<id>] term=<t> index=<i> logterm=<t> [entries=<index>/<term>,...] [commit=<c>]
//	resp to=<id> [from=<id>] term=<t> index=<i> [reject]
//	heartbeat to=<id> [from=<id>] term=<t> [commit=<c>]
//	----
//	the messages coalesce returns, in order, in the same notation
func TestCoalesceDataDriven(t *testing.T) {
	datadriven.RunTest(t, "testdata/coalesce", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "coalesce" {
			d.Fatalf(t, "unknown command %s", d.Cmd)
		}
		var msgs []*pb.Message
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			msgs = append(msgs, parseMsg(t, line))
		}
		before := make([]string, len(msgs))
		for i, m := range msgs {
			before[i] = fmtMsg(m)
		}
		out := coalesce(msgs)
		for i, m := range msgs {
			if got := fmtMsg(m); got != before[i] {
				t.Fatalf("coalesce modified its input: %s became %s", before[i], got)
			}
		}
		var lines []string
		for _, m := range out {
			lines = append(lines, fmtMsg(m))
		}
		return strings.Join(lines, "\n")
	})
}

// TestCoalesceDoesNotAliasEntries: a merged MsgApp must not append into
// the entry slice of the first message, which is raft's log (its
// capacity may extend over entries raft still holds).
func TestCoalesceDoesNotAliasEntries(t *testing.T) {
	backing := []*pb.Entry{ent(11, 5), ent(12, 5), ent(13, 5)}
	first := backing[:1:3]
	a := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: u64(2), From: u64(1), Term: u64(5),
		Index: u64(10), LogTerm: u64(5), Entries: first, Commit: u64(9)}
	b := &pb.Message{Type: pb.MessageType_MsgApp.Enum(), To: u64(2), From: u64(1), Term: u64(5),
		Index: u64(11), LogTerm: u64(5), Entries: []*pb.Entry{ent(12, 6)}, Commit: u64(10)}
	out := coalesce([]*pb.Message{a, b})
	if len(out) != 1 || len(out[0].Entries) != 2 {
		t.Fatalf("expected one merged MsgApp with 2 entries, got %v", out)
	}
	if backing[1].GetTerm() != 5 || backing[2].GetIndex() != 13 {
		t.Fatalf("coalesce wrote into the first message's entry slice: %v", backing)
	}
}

func u64(v uint64) *uint64 { return &v }

func ent(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: u64(index), Term: u64(term), Type: pb.EntryType_EntryNormal.Enum(), Data: []byte("x")}
}

func parseMsg(t *testing.T, line string) *pb.Message {
	t.Helper()
	f := strings.Fields(line)
	m := &pb.Message{From: u64(1)}
	switch f[0] {
	case "app":
		m.Type = pb.MessageType_MsgApp.Enum()
	case "resp":
		m.Type = pb.MessageType_MsgAppResp.Enum()
	case "heartbeat":
		m.Type = pb.MessageType_MsgHeartbeat.Enum()
	default:
		t.Fatalf("unknown message type %q", f[0])
	}
	num := func(v string) *uint64 {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return &n
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "to":
			m.To = num(v)
		case "from":
			m.From = num(v)
		case "term":
			m.Term = num(v)
		case "index":
			m.Index = num(v)
		case "logterm":
			m.LogTerm = num(v)
		case "commit":
			m.Commit = num(v)
		case "reject":
			r := true
			m.Reject = &r
		case "entries":
			for _, e := range strings.Split(v, ",") {
				i, tm, _ := strings.Cut(e, "/")
				m.Entries = append(m.Entries, ent(*num(i), *num(tm)))
			}
		default:
			t.Fatalf("unknown field %q in %q", k, line)
		}
	}
	return m
}

func fmtMsg(m *pb.Message) string {
	var b strings.Builder
	switch m.GetType() {
	case pb.MessageType_MsgApp:
		b.WriteString("app")
	case pb.MessageType_MsgAppResp:
		b.WriteString("resp")
	case pb.MessageType_MsgHeartbeat:
		b.WriteString("heartbeat")
	default:
		b.WriteString(m.GetType().String())
	}
	fmt.Fprintf(&b, " to=%d from=%d term=%d", m.GetTo(), m.GetFrom(), m.GetTerm())
	if m.GetType() != pb.MessageType_MsgHeartbeat {
		fmt.Fprintf(&b, " index=%d", m.GetIndex())
	}
	if m.GetType() == pb.MessageType_MsgApp {
		fmt.Fprintf(&b, " logterm=%d", m.GetLogTerm())
		if len(m.Entries) > 0 {
			var es []string
			for _, e := range m.Entries {
				es = append(es, fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm()))
			}
			fmt.Fprintf(&b, " entries=%s", strings.Join(es, ","))
		}
	}
	if m.Commit != nil {
		fmt.Fprintf(&b, " commit=%d", m.GetCommit())
	}
	if m.GetReject() {
		b.WriteString(" reject")
	}
	return b.String()
}
