// Package resp is Strata's Redis gateway: it speaks RESP2 and RESP3 to
// Redis clients (redis-cli, redis-benchmark, go-redis, ...) and runs their
// commands on the replicated, transactional keyspace through the same
// client library the SQL layer uses (internal/kv). A single node is a
// cluster of one: every command goes through a Percolator transaction to
// the region leader and through Raft to Pebble.
//
// Contract:
//   - Every command, and every MULTI/EXEC, is one transaction: atomic and
//     snapshot-isolated whichever regions its keys are in (MSET, DEL of many
//     keys, RENAME, EXEC included). A write is acknowledged only after it
//     is committed, i.e. fsynced through Raft.
//   - Single-key commands are linearizable: a command reads at a timestamp
//     from the timestamp oracle taken after it arrived, and a one-phase
//     commit's timestamp never exceeds what the oracle hands out next.
//   - A write conflict with a concurrent command re-runs the command from
//     scratch on a new snapshot (the client saw nothing of the failed
//     attempt); an EXEC with WATCHed keys that changed replies nil.
//   - A command that fails (wrong type, bad argument) changes nothing.
//   - Redis keys never collide with SQL data: they live under their own
//     prefix (keys.go). Expired keys are invisible at once and reclaimed
//     in the background (reaper.go).
//
// Files: proto.go (wire codec), server.go (connections, dispatch,
// transactions and retries), command.go (the command table), cmd_*.go
// (commands by group), keyspace.go and keys.go (data layout), reaper.go
// (expiry), cursor.go (SCAN cursors).
package resp
