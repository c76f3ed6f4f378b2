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
//   - Single-key commands are linearizable. GET reads the key's newest
//     committed value on the region leader with no timestamp at all
//     (client.Client.GetLatest: no TSO round trip); other reads take a
//     snapshot at a timestamp from the oracle taken after the command
//     arrived, and a one-phase commit's timestamp never exceeds what the
//     oracle hands out next.
//   - Write commands of all connections are run in shared batch
//     transactions (batch.go): one commit for many commands, commands on
//     one key in sequence. Replies are released after the commit. A write
//     conflict with another transaction re-runs the batch from scratch on
//     a new snapshot (no client saw anything of the failed attempt); an
//     EXEC with WATCHed keys that changed replies nil.
//   - A command that fails (wrong type, bad argument) changes nothing.
//   - Redis keys never collide with SQL data: they live under their own
//     prefix (keys.go). Expired keys are invisible at once and reclaimed
//     in the background (reaper.go).
//
// Commands: strings (GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX MGET
// MSET MSETNX INCR INCRBY INCRBYFLOAT DECR DECRBY APPEND STRLEN GETRANGE
// SUBSTR SETRANGE), keys (DEL UNLINK EXISTS TYPE RENAME RENAMENX EXPIRE
// PEXPIRE EXPIREAT PEXPIREAT TTL PTTL EXPIRETIME PEXPIRETIME PERSIST SCAN
// KEYS DBSIZE FLUSHDB FLUSHALL), hashes (HSET HMSET HSETNX HGET HMGET
// HGETALL HKEYS HVALS HDEL HLEN HEXISTS HSTRLEN HINCRBY HINCRBYFLOAT HSCAN),
// transactions (MULTI EXEC DISCARD WATCH UNWATCH) and the connection and
// server commands clients send (PING ECHO HELLO AUTH SELECT QUIT RESET
// CLIENT INFO COMMAND CONFIG TIME ACL). There is one database (SELECT 0).
//
// Security: ACL users (acl.go, stored in the cluster by acl_store.go)
// with passwords, key patterns and command rules, checked on every
// command with Redis's NOPERM errors; TLS on the same port when
// Config.TLS is set (a connection opening with a TLS handshake gets TLS).
//
// Differences from Redis: hash fields and SCAN/KEYS results come in byte
// order; SCAN cursors are remembered by the node that issued them (the
// 65536 most recent); FLUSHALL deletes in transactions of 4096 records,
// so it is not atomic as a whole; a WATCHed key that was created and
// deleted again before EXEC looks unchanged.
//
// Files: proto.go (wire codec), server.go (connections, dispatch,
// transactions and retries), batch.go (shared write batches), command.go
// (the command table), cmd_*.go (commands by group), keyspace.go and
// keys.go (data layout), reaper.go (expiry), cursor.go (SCAN cursors).
package resp
