package resp

import (
	"strings"
	"sync"
	"time"
)

// The ACL LOG: this node's recent refusals, as Redis 7 keeps them. A
// refusal is a command or a key an ACL rule denied, or an AUTH that
// failed. Refusals with the same reason, context, object and user within
// aclLogGroupWindow of the entry's last update count into one entry,
// which moves to the front; at most aclLogMaxLen entries are kept, newest
// first. The log is per node and in memory, like Redis's per instance.

const (
	aclLogMaxLen      = 128
	aclLogGroupWindow = 60 * time.Second
)

type aclLogEntry struct {
	count            int64
	reason, context  string // reason: command, key or auth; context: toplevel or multi
	object, username string
	clientInfo       string
	id               int64
	created, updated time.Time
}

type aclLog struct {
	mu      sync.Mutex
	nextID  int64
	entries []*aclLogEntry // newest first
}

// add records a refusal at now.
func (l *aclLog) add(reason, context, object, username, clientInfo string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.entries {
		if e.reason == reason && e.context == context && e.object == object && e.username == username &&
			now.Sub(e.updated) <= aclLogGroupWindow {
			e.count++
			e.updated, e.clientInfo = now, clientInfo
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := &aclLogEntry{count: 1, reason: reason, context: context, object: object, username: username,
		clientInfo: clientInfo, id: l.nextID, created: now, updated: now}
	l.nextID++
	l.entries = append(l.entries, nil)
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
	if len(l.entries) > aclLogMaxLen {
		l.entries = l.entries[:aclLogMaxLen]
	}
}

// recent returns copies of the newest n entries.
func (l *aclLog) recent(n int) []aclLogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]aclLogEntry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

func (l *aclLog) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// logDenial records a refused command in the ACL LOG.
func (s *session) logDenial(d *aclDenial, inMulti bool) {
	reason := "command"
	if d.key {
		reason = "key"
	}
	context := "toplevel"
	if inMulti {
		context = "multi"
	}
	s.srv.aclLog.add(reason, context, d.object, s.userName(), strings.TrimSuffix(s.info(), "\n"), s.srv.cfg.Now())
}

// writeACLLog answers ACL LOG [count].
func writeACLLog(w *Writer, entries []aclLogEntry, now time.Time) {
	w.WriteArrayLen(len(entries))
	for _, e := range entries {
		w.WriteMapLen(10)
		w.WriteBulkString("count")
		w.WriteInt(e.count)
		w.WriteBulkString("reason")
		w.WriteBulkString(e.reason)
		w.WriteBulkString("context")
		w.WriteBulkString(e.context)
		w.WriteBulkString("object")
		w.WriteBulkString(e.object)
		w.WriteBulkString("username")
		w.WriteBulkString(e.username)
		w.WriteBulkString("age-seconds")
		w.WriteDouble(float64(now.Sub(e.updated).Milliseconds()) / 1000)
		w.WriteBulkString("client-info")
		w.WriteBulkString(e.clientInfo)
		w.WriteBulkString("entry-id")
		w.WriteInt(e.id)
		w.WriteBulkString("timestamp-created")
		w.WriteInt(e.created.UnixMilli())
		w.WriteBulkString("timestamp-last-updated")
		w.WriteInt(e.updated.UnixMilli())
	}
}
