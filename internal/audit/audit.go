// Package audit writes Strata's audit log: one JSON object per line for
// every login (MySQL and Redis, successful or refused) and every DDL and
// DCL statement (CREATE/ALTER/DROP/RENAME/TRUNCATE, CREATE USER, GRANT,
// SET PASSWORD, ACL SETUSER, ...), with its outcome. Statements are logged
// in normalised form (literals replaced by ?, so passwords never reach the
// log) with their digest. The file is rotated by size by lumberjack: the
// full file is renamed with a timestamp and a new one started; the oldest
// backups beyond MaxBackups are removed.
//
// A nil *Logger logs nothing, so callers need not check whether auditing
// is on.
package audit

import (
	"encoding/json"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Event is one line of the audit log.
type Event struct {
	Time time.Time `json:"time"`
	// Event is "login" or "statement".
	Event string `json:"event"`
	// Protocol is "mysql" or "redis".
	Protocol string `json:"protocol"`
	User     string `json:"user"`
	Host     string `json:"host"`
	ConnID   uint64 `json:"connection_id"`
	// Class is "ddl" or "dcl" for statements.
	Class string `json:"class,omitempty"`
	// Digest and Statement: the SHA-256 digest of the normalised
	// statement, and that text.
	Digest    string `json:"digest,omitempty"`
	Statement string `json:"statement,omitempty"`
	// Outcome is "success" or "failure"; ErrorCode the MySQL error code of
	// a failure (0 for Redis), Reason why a login failed.
	Outcome   string `json:"outcome"`
	ErrorCode int    `json:"error_code,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Config says where the log goes and when it is rotated.
type Config struct {
	Path string
	// MaxSizeMB is the size at which the file is rotated (default 100).
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept (default 10; the
	// newest are kept).
	MaxBackups int
}

// Logger appends events to the audit log. It is safe for concurrent use.
type Logger struct {
	mu  sync.Mutex
	out *lumberjack.Logger
	now func() time.Time
}

// Open opens (or creates) the log at cfg.Path; the file is created on the
// first event.
func Open(cfg Config) *Logger {
	if cfg.MaxSizeMB <= 0 {
		cfg.MaxSizeMB = 100
	}
	if cfg.MaxBackups <= 0 {
		cfg.MaxBackups = 10
	}
	return &Logger{out: &lumberjack.Logger{Filename: cfg.Path, MaxSize: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups},
		now: time.Now}
}

// Log appends e, stamping its time if unset. A failure to write is
// dropped: auditing must not stop the database (the error is returned for
// callers that care).
func (l *Logger) Log(e Event) error {
	if l == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.out.Write(b)
	return err
}

// Close closes the file.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Close()
}
