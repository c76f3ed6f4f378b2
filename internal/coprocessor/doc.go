// Package coprocessor evaluates plan fragments next to the data, on a
// region's leader (TiKV's coprocessor): a table scan or a covering index
// scan at a snapshot, a filter, then a partial hash aggregation (COUNT,
// SUM, MIN, MAX, AVG as sum and count), a top-N or a limit, with the
// results returned as column batches (kvpb.CopBatch).
//
// Contract:
//   - The SQL planner serializes a fragment (kvpb.CopDAG) with ExprToPB,
//     which accepts only the expressions listed in kvpb.CopExprKind and the
//     functions in PushableFuncs, and checks that the expression rebuilt
//     from the message (ExprFromPB, package expr's own constructors) prints
//     and types the same; anything else stays in SQL.
//   - The KV server (kvserver.KvCoprocessor) compiles the fragment
//     (Compile), reads the region with the checks of a scan (locks,
//     versions at the request's timestamp, the GC safe point) and feeds
//     every visible entry to a Runner; Finish returns the output batch.
//   - The SQL executor merges aggregation output with FinalAgg (the second
//     phase) into the rows its own aggregation would have produced.
//
// Compiled fragments are immutable; a Runner serves one request.
package coprocessor
