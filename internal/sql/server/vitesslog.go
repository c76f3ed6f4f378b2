package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	vtlog "github.com/dolthub/vitess/go/vt/log"
)

var routeVitessLogOnce sync.Once

// routeVitessLog sends the protocol library's log lines to logger. vitess
// logs through package-level functions, so this is process-wide and done
// once, with the first server's logger. Its per-connection chatter
// (clients disconnecting, errors it already returned to the client) goes
// to debug; panics it recovered from go to error.
func routeVitessLog(logger *slog.Logger) {
	routeVitessLogOnce.Do(func() {
		logger = logger.With("source", "vitess")
		emit := func(msg string) {
			msg = strings.TrimSpace(msg)
			level := slog.LevelDebug
			if strings.Contains(msg, "panic") {
				level = slog.LevelError
			}
			logger.Log(context.Background(), level, msg)
		}
		logArgs := func(args ...any) { emit(fmt.Sprint(args...)) }
		logFormat := func(format string, args ...any) { emit(fmt.Sprintf(format, args...)) }
		vtlog.Info, vtlog.Warning, vtlog.Error = logArgs, logArgs, logArgs
		vtlog.Infof, vtlog.Warningf, vtlog.Errorf = logFormat, logFormat, logFormat
	})
}
