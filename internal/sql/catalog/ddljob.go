package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

// The records of online schema change (the protocol is described in
// internal/sql/DESIGN.md, "Online schema change"): the DDL job queue and
// history, the owner that runs the jobs, and each SQL engine's lease on the
// schema version it runs.

var (
	prefixDDLReorg   = []byte("mDDLReorg")
	prefixDDLJob     = []byte("mDDLJob")
	prefixDDLHistory = []byte("mDDLHistory")
	keyDDLOwner      = []byte("mDDLOwner")
	prefixDDLEngine  = []byte("mDDLEngine")
)

// SchemaState is where a schema element is in an online change: F1's
// states, named as TiDB names them. A change moves an element one state
// per schema version, and no engine runs more than one version behind, so
// two engines never disagree by more than one state.
type SchemaState int

const (
	// StatePublic: read by queries and maintained by writers. It is the
	// zero value, the state of every index stored before states existed.
	StatePublic SchemaState = iota
	// StateDeleteOnly: never read; a write that removes a row removes its
	// entry, a write that adds a row adds none.
	StateDeleteOnly
	// StateWriteOnly: never read; writers add and remove entries as for a
	// public index (and check a unique index's uniqueness).
	StateWriteOnly
	// StateWriteReorg: write-only while the backfill writes the entries of
	// the rows that existed before every engine was write-only.
	StateWriteReorg
	// StateAbsent: not part of the schema (where an add starts and a drop
	// ends).
	StateAbsent
)

// String names the state as TiDB's ADMIN SHOW DDL JOBS does.
func (s SchemaState) String() string {
	switch s {
	case StatePublic:
		return "public"
	case StateDeleteOnly:
		return "delete only"
	case StateWriteOnly:
		return "write only"
	case StateWriteReorg:
		return "write reorganization"
	case StateAbsent:
		return "none"
	}
	return fmt.Sprintf("state %d", int(s))
}

// Writable reports whether writers add entries of an index in state s.
func (s SchemaState) Writable() bool {
	return s == StatePublic || s == StateWriteOnly || s == StateWriteReorg
}

// JobState is where a DDL job is, with TiDB's names.
type JobState string

const (
	JobQueueing     JobState = "queueing"      // submitted, not started
	JobRunning      JobState = "running"       // moving through its schema states
	JobRollingBack  JobState = "rollingback"   // failed or cancelled after it changed the schema: undoing
	JobSynced       JobState = "synced"        // done (history)
	JobRollbackDone JobState = "rollback done" // undone (history)
	JobCancelled    JobState = "cancelled"     // failed or cancelled before it changed the schema (history)
)

// JobError is a MySQL error a job ended with, or a warning it raised.
type JobError struct {
	Code    uint16 `json:"code"`
	State   string `json:"state"`
	Message string `json:"message"`
}

// Job is one DDL statement on its way through the schema states. Any SQL
// engine submits jobs; the owner runs them one at a time in id order. A job
// is a record in KV, changed only in transactions that also change the
// schema (or record backfill progress), so it survives restarts and owner
// changes and a new owner resumes it where the last step left it.
type Job struct {
	ID    int64  `json:"id"`
	Type  string `json:"type"`  // "create table", "add index", ...
	Query string `json:"query"` // as the client sent it
	// Stmt is the statement the owner applies, restored from the syntax
	// tree the session built (Query when empty).
	Stmt string `json:"stmt,omitempty"`
	// DB and Vars are the submitting session's current database and the
	// session variables the statement is evaluated with.
	DB   string            `json:"db,omitempty"`
	Vars map[string]string `json:"vars,omitempty"`

	SchemaName string `json:"schema_name,omitempty"`
	TableName  string `json:"table_name,omitempty"`
	SchemaID   int64  `json:"schema_id,omitempty"`
	TableID    int64  `json:"table_id,omitempty"`

	State       JobState    `json:"state"`
	SchemaState SchemaState `json:"schema_state"`
	// Barrier: the statement changes its table in a way writers one
	// version behind would get wrong (columns, foreign keys), so the job
	// first stops writes to the table (TableInfo.WriteBarrier) and
	// applies the statement once every engine has.
	Barrier bool `json:"barrier,omitempty"`
	// Applied: the statement's catalog change is committed; only the
	// states of the indexes it adds or drops remain.
	Applied bool `json:"applied,omitempty"`
	// Adding and Dropping are the ids of the indexes of TableID in
	// TableInfo.Changing that the job adds or drops.
	Adding   []int64 `json:"adding,omitempty"`
	Dropping []int64 `json:"dropping,omitempty"`

	// RowCount counts the rows backfilled once the backfill is done
	// (ReorgDone); while it runs, its ReorgRanges count them.
	RowCount  int64 `json:"row_count,omitempty"`
	ReorgDone bool  `json:"reorg_done,omitempty"`
	// ReorgMode is how the backfill writes index entries, chosen when it
	// starts: ReorgIngest or ReorgTxn.
	ReorgMode string `json:"reorg_mode,omitempty"`

	// Version is the schema version the job's last step committed.
	Version int64 `json:"version,omitempty"`
	// Cancel is set by ADMIN CANCEL DDL JOBS.
	Cancel bool `json:"cancel,omitempty"`

	Created  int64 `json:"created"` // unix ms
	Started  int64 `json:"started,omitempty"`
	Finished int64 `json:"finished,omitempty"`

	Error    *JobError  `json:"error,omitempty"`
	Warnings []JobError `json:"warnings,omitempty"`
}

// Backfill modes (Job.ReorgMode), named as TiDB's ADMIN SHOW DDL JOBS
// shows them after the job type ("add index /* ingest */").
const (
	// ReorgIngest: sorted runs of entries imported without transactions.
	ReorgIngest = "ingest"
	// ReorgTxn: entries written in transactions of a batch of rows each.
	ReorgTxn = "txn"
)

// Done reports whether the job is over (it is then in the history).
func (j *Job) Done() bool {
	return j.State == JobSynced || j.State == JobRollbackDone || j.State == JobCancelled
}

func jobKey(prefix []byte, id int64) []byte {
	return tablecodec.AppendInt(append([]byte(nil), prefix...), id)
}

func putJSON(txn kv.Txn, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

func getJSON(ctx context.Context, txn kv.Txn, key []byte, v any) (bool, error) {
	b, err := txn.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("catalog: corrupt record %q: %w", key, err)
	}
	return true, nil
}

// PutJob stores a job of the queue (new or changed).
func PutJob(txn kv.Txn, j *Job) error { return putJSON(txn, jobKey(prefixDDLJob, j.ID), j) }

// QueuedJob reads a job of the queue; nil when it is not there.
func QueuedJob(ctx context.Context, txn kv.Txn, id int64) (*Job, error) {
	var j Job
	ok, err := getJSON(ctx, txn, jobKey(prefixDDLJob, id), &j)
	if !ok || err != nil {
		return nil, err
	}
	return &j, nil
}

// Jobs lists the queue in id order (the order the owner runs it).
func Jobs(ctx context.Context, txn kv.Txn) ([]*Job, error) {
	return scanJobs(ctx, txn, prefixDDLJob, 0, false)
}

// FinishJob moves a job from the queue to the history.
func FinishJob(txn kv.Txn, j *Job) error {
	if err := txn.Delete(jobKey(prefixDDLJob, j.ID)); err != nil {
		return err
	}
	return putJSON(txn, jobKey(prefixDDLHistory, j.ID), j)
}

// HistoryJob reads a finished job; nil when it is not (yet) there.
func HistoryJob(ctx context.Context, txn kv.Txn, id int64) (*Job, error) {
	var j Job
	ok, err := getJSON(ctx, txn, jobKey(prefixDDLHistory, id), &j)
	if !ok || err != nil {
		return nil, err
	}
	return &j, nil
}

// RecentHistory lists up to n finished jobs, newest first.
func RecentHistory(ctx context.Context, txn kv.Txn, n int) ([]*Job, error) {
	return scanJobs(ctx, txn, prefixDDLHistory, n, true)
}

func scanJobs(ctx context.Context, txn kv.Txn, prefix []byte, limit int, reverse bool) ([]*Job, error) {
	kvs, err := txn.Scan(ctx, prefix, tablecodec.PrefixEnd(prefix), limit, reverse)
	if err != nil {
		return nil, err
	}
	out := make([]*Job, 0, len(kvs))
	for _, e := range kvs {
		var j Job
		if err := json.Unmarshal(e.Value, &j); err != nil {
			return nil, fmt.Errorf("catalog: corrupt ddl job %q: %w", e.Key, err)
		}
		out = append(out, &j)
	}
	return out, nil
}

// Owner is the engine that runs DDL jobs, until Expires (unix ns on its
// clock) unless it renews.
type Owner struct {
	ID      string `json:"id"`
	Addr    string `json:"addr,omitempty"`
	Expires int64  `json:"expires"`
}

// GetOwner reads the owner record; nil when there is none.
func GetOwner(ctx context.Context, txn kv.Txn) (*Owner, error) {
	var o Owner
	ok, err := getJSON(ctx, txn, keyDDLOwner, &o)
	if !ok || err != nil {
		return nil, err
	}
	return &o, nil
}

// OwnerKey is the key of the owner record, for a batch read (DecodeOwner
// reads its value).
func OwnerKey() []byte { return keyDDLOwner }

// DecodeOwner reads an owner record's value.
func DecodeOwner(b []byte) (*Owner, error) {
	var o Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("catalog: corrupt record %q: %w", keyDDLOwner, err)
	}
	return &o, nil
}

// PutOwner stores the owner record.
func PutOwner(txn kv.Txn, o *Owner) error { return putJSON(txn, keyDDLOwner, o) }

// DeleteOwner removes the owner record.
func DeleteOwner(txn kv.Txn) error { return txn.Delete(keyDDLOwner) }

// EngineLease is an SQL engine's promise about the schema it runs, valid
// until Expires (unix ns on the engine's clock): it has loaded version
// Loaded, and none of its transactions will commit under a version older
// than Floor (Floor <= Loaded).
type EngineLease struct {
	ID      string `json:"id"`
	Addr    string `json:"addr,omitempty"`
	Loaded  int64  `json:"loaded"`
	Floor   int64  `json:"floor"`
	Expires int64  `json:"expires"`
}

func engineKey(id string) []byte { return append(append([]byte(nil), prefixDDLEngine...), id...) }

// PutEngineLease stores an engine's lease.
func PutEngineLease(txn kv.Txn, l *EngineLease) error { return putJSON(txn, engineKey(l.ID), l) }

// DeleteEngineLease removes an engine's lease (the engine stopped).
func DeleteEngineLease(txn kv.Txn, id string) error { return txn.Delete(engineKey(id)) }

// EngineLeases lists every engine's lease, expired ones included.
func EngineLeases(ctx context.Context, txn kv.Txn) ([]*EngineLease, error) {
	kvs, err := txn.Scan(ctx, prefixDDLEngine, tablecodec.PrefixEnd(prefixDDLEngine), 0, false)
	if err != nil {
		return nil, err
	}
	out := make([]*EngineLease, 0, len(kvs))
	for _, e := range kvs {
		var l EngineLease
		if err := json.Unmarshal(e.Value, &l); err != nil {
			return nil, fmt.Errorf("catalog: corrupt engine lease %q: %w", e.Key, err)
		}
		out = append(out, &l)
	}
	return out, nil
}

// NextVersion increments the schema version inside a DDL step and returns
// the new version.
func NextVersion(ctx context.Context, txn kv.Txn) (int64, error) {
	v, err := Version(ctx, txn)
	if err != nil {
		return 0, err
	}
	return v + 1, txn.Set(keyVersion, []byte(strconv.FormatInt(v+1, 10)))
}

// GuardVersion reads the schema version and writes it back unchanged, so
// that txn conflicts with any transaction that changes the version
// concurrently (a DDL step). An engine registers its lease this way: the
// owner then either sees the lease before it moves the version, or the
// registration sees the moved version.
func GuardVersion(ctx context.Context, txn kv.Txn) (int64, error) {
	v, err := Version(ctx, txn)
	if err != nil {
		return 0, err
	}
	return v, txn.Set(keyVersion, []byte(strconv.FormatInt(v, 10)))
}

// ReorgRange is one share of a backfill: the rows whose record keys are in
// [Next, End) are still to be done (End nil: up to the table's end). A
// backfill splits the table into ranges that workers fill at the same
// time; each batch of a range rewrites its record in the batch's
// transaction, so a new owner resumes every range where it stopped.
type ReorgRange struct {
	Job  int64  `json:"job"`
	Part int    `json:"part"`
	Next []byte `json:"next"`
	End  []byte `json:"end,omitempty"`
	Rows int64  `json:"rows,omitempty"`
	Done bool   `json:"done,omitempty"`
}

func reorgKey(job int64, part int) []byte {
	return tablecodec.AppendInt(jobKey(prefixDDLReorg, job), int64(part))
}

// PutReorgRange stores a backfill range.
func PutReorgRange(txn kv.Txn, r *ReorgRange) error { return putJSON(txn, reorgKey(r.Job, r.Part), r) }

// DeleteReorgRange removes a backfill range.
func DeleteReorgRange(txn kv.Txn, r *ReorgRange) error { return txn.Delete(reorgKey(r.Job, r.Part)) }

// GetReorgRange reads one backfill range; nil when it is gone.
func GetReorgRange(ctx context.Context, txn kv.Txn, job int64, part int) (*ReorgRange, error) {
	var r ReorgRange
	ok, err := getJSON(ctx, txn, reorgKey(job, part), &r)
	if !ok || err != nil {
		return nil, err
	}
	return &r, nil
}

// ReorgRanges lists a job's backfill ranges.
func ReorgRanges(ctx context.Context, txn kv.Txn, job int64) ([]*ReorgRange, error) {
	p := jobKey(prefixDDLReorg, job)
	kvs, err := txn.Scan(ctx, p, tablecodec.PrefixEnd(p), 0, false)
	if err != nil {
		return nil, err
	}
	out := make([]*ReorgRange, 0, len(kvs))
	for _, e := range kvs {
		var r ReorgRange
		if err := json.Unmarshal(e.Value, &r); err != nil {
			return nil, fmt.Errorf("catalog: corrupt backfill range %q: %w", e.Key, err)
		}
		out = append(out, &r)
	}
	return out, nil
}
