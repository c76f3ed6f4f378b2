// Package resp holds the tests that hold Strata's Redis gateway
// (internal/resp, served by `strata start --resp-addr`) to Redis's
// behaviour. It has no code of its own; every file is a test. The tests
// talk to a real server over TCP:
//
//   - by default, a strata process started by the integration harness
//     (test/integration): one node shared by the package's tests (started on
//     first use with --max-value-size 1048576, FLUSHALL before each test),
//     plus nodes of their own for the tests that need a password, a crash
//     or region splits;
//
//   - with REDIS_COMPAT_ADDR=host:port, a real redis-server instead, which
//     is how the tests themselves are checked: every test asserts what
//     Redis 7 does and passes against it, except the strata-only ones (kill
//     -9, region splits), which skip. Start it as
//
//     redis-server --port 16399 --save "" --appendonly no --databases 1
//
//     (one database, as strata has: SELECT 1 fails on both). The tests set
//     proto-max-bulk-len to 1 MiB on it, the limit the shared strata node is
//     given, and restore it at the end; TestAuth sets requirepass for its
//     duration.
//
// What each suite proves:
//
//   - transcript_test.go and testdata/transcripts: exact replies, byte for
//     byte (reply type included: status or bulk, RESP2 or RESP3 null, map
//     or array), of every command issue 3 lists (strings with every SET
//     option, keys, TTL options, hashes, MULTI/EXEC/DISCARD/WATCH/UNWATCH,
//     including a WATCH aborted by another client, server commands, RESP3
//     after HELLO 3), and the exact text of every error: WRONGTYPE, wrong
//     number of arguments, unknown command and subcommand, not an integer,
//     overflow, syntax. The recorded replies came from redis-server 7.0.15
//     (-rewrite against REDIS_COMPAT_ADDR) and were reviewed.
//   - strings_test.go, keys_test.go, hashes_test.go, server_test.go: every
//     command through go-redis (github.com/redis/go-redis/v9) over RESP2
//     and RESP3, as applications use it: typed results, SCAN and HSCAN
//     with MATCH/COUNT/TYPE followed to the end (every key exactly once),
//     HELLO 3's map, CLIENT SETNAME/GETNAME/ID/INFO (go-redis's parser),
//     CONFIG GET, COMMAND (go-redis's strict parser; every command listed),
//     COMMAND COUNT/INFO/DOCS, INFO, SELECT, RESET; errors keep the
//     connection (same CLIENT ID) and change nothing; binary-safe keys,
//     values and fields (all 256 byte values).
//   - auth_test.go and testdata/auth: with --resp-password, NOAUTH before
//     AUTH, WRONGPASS, AUTH with one and two arguments, HELLO AUTH, RESET
//     logging out, go-redis and redis-cli -a; without a password, AUTH's
//     error (in testdata/transcripts/server).
//   - ttl_test.go and testdata/transcripts/expire: the TTL that EX, PX,
//     EXAT, PXAT, KEEPTTL, SETEX, PSETEX, GETEX, EXPIRE, PEXPIRE, EXPIREAT,
//     PEXPIREAT (with NX/XX/GT/LT) set, PERSIST, which writes keep or drop a
//     TTL; an expired key is never returned by GET, EXISTS, MGET, KEYS,
//     SCAN, DBSIZE, TYPE, HGETALL and the rest, and writes treat it as
//     missing; expired keys nobody reads are reclaimed in the background
//     (INFO stats expired_keys, DBSIZE), a key written again after it
//     expired is not, and reclaimed keys do not come back.
//   - malformed_test.go and testdata/malformed: raw bytes over net.Conn:
//     bad multibulk and bulk lengths, "expected '$'", unbalanced quotes in
//     inline commands, commands cut short, a 2 GiB or just-over-the-limit
//     announced bulk refused before it arrives (no allocation: the node's
//     RSS is checked), values grown past the limit by APPEND and SETRANGE,
//     over-long inline and count lines, 10,000 pipelined commands in one
//     write, a writer sending one byte at a time, 50 concurrent clients; the
//     connection stays open exactly where Redis keeps it, and the server
//     answers PING on a new connection after every case.
//   - rediscli_test.go: Debian's redis-cli (redis-tools) scripted (command
//     line, commands on stdin, -x, --raw, --no-raw, -3, --scan), --pipe of
//     a generated RESP file of 10,000 SETs ("errors: 0, replies: 10000"),
//     and interactive on a pseudo-terminal. Skipped, saying so, when
//     redis-cli is not installed; CI installs it.
//   - linearizability_test.go: 8 clients run GET/SET/INCR on 4 keys for 3
//     seconds; the history is checked with porcupine
//     (github.com/anishathalye/porcupine) against a register model,
//     partitioned by key; a failure writes porcupine's visualization to the
//     test's artifact directory (kept with go test -artifacts).
//     TestLinearizabilityCheckerRejects shows the same model rejecting
//     non-linearizable histories.
//   - durability_test.go (strata only): SIGKILL under a SET/INCR load, twice;
//     after each restart every acknowledged SET is there with its value and
//     the counter is at least the last acknowledged INCR.
//   - atomicity_test.go: MSET, MSETNX, DEL of two keys, RENAME, MULTI/EXEC,
//     an EXEC aborted by WATCH, and a hash's HSET/DEL are all-or-nothing and
//     isolated while readers run: on strata with the keys, and a hash's
//     fields and metadata, in different regions (POST /admin/split, checked
//     with GET /admin/regions).
//
// Run against strata: go test ./test/resp. Against Redis:
// REDIS_COMPAT_ADDR=127.0.0.1:16399 go test ./test/resp.
package resp
