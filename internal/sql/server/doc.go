// Package server is Strata's MySQL wire-protocol front end: it accepts client
// connections, offers them TLS, authenticates them against the cluster's
// accounts (caching_sha2_password and mysql_native_password; auth.go) and
// translates every protocol command into calls on one sql.Session per
// connection.
//
// The protocol mechanics (handshake, packet framing, result-set and
// prepared-statement packets) come from github.com/dolthub/vitess/go/mysql;
// this package owns the translation between that library and the SQL layer:
//
//   - COM_QUERY runs Session.Execute; with CLIENT_MULTI_STATEMENTS the query is
//     split into statements here and each one is executed and answered in
//     turn, stopping at the first error as MySQL does. Without the capability
//     a query holding more than one statement is rejected with 1064 before
//     anything runs.
//   - COM_STMT_PREPARE runs Session.Prepare: the parameter count and result
//     columns reported to the client are the SQL layer's, not vitess's, and
//     vitess's own grammar never sees the statement (clientconn.go), so
//     MySQL 8 and TiDB syntax it does not know can still be prepared.
//     COM_STMT_EXECUTE converts the bound values (typed by the client) into
//     types.Datum and runs Session.ExecutePrepared; result rows are encoded in
//     the binary protocol with the column types the SQL layer reported.
//     COM_STMT_CLOSE is not forwarded by vitess, so statements the client
//     closed are released from the session at the connection's next prepare.
//   - COM_INIT_DB runs Session.UseDB; COM_RESET_CONNECTION replaces the
//     session with a fresh one on the same default database.
//   - Every error reaching the client carries a MySQL code and SQLSTATE:
//     *sqlerr.Error keeps its own, a kv.RetryableError becomes 1213 (or 1205
//     for a lock-wait timeout), anything else is 1105 (HY000).
//   - The server status flags (in transaction, autocommit) sent with every OK
//     and EOF packet are read from the session after each statement.
//
// The listener retries failed accepts (out of file descriptors, ...) with
// backoff instead of letting the library's accept loop end; only Close
// stops it. A client must finish the handshake within HandshakeTimeout
// (clientconn.go). MaxConnections bounds concurrent clients. Connection, command,
// error and panic counts are exported as strata_mysql_* Prometheus metrics.
//
// A panic while serving one connection (a malformed packet the protocol
// library did not anticipate, or a bug below) is recovered, logged with its
// stack, and costs only that connection: its session is closed, which rolls
// back any open transaction. The server keeps serving everyone else.
//
// Concurrency: a connection's commands are handled by one goroutine, so its
// session is never used concurrently. Sessions of different connections run
// in parallel; the SQL engine is responsible for its own synchronization.
package server
