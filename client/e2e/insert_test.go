package e2e_test

import (
	"context"
	"errors"
	"testing"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/kv"
)

// Insert leaves the absence check of a key to the commit: a commit whose
// inserted key has a value fails with *kv.KeyExistsError and writes none
// of its keys, in a one-phase and in a two-phase commit.
func TestInsertChecksAbsenceAtCommit(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	twoPC := client.New(tn.pd, client.NewGRPCRouter(tn.pd), client.Options{DisableOnePC: true})
	defer twoPC.Close()
	for name, store := range map[string]kv.Storage{"1pc": tn.node.Storage(), "2pc": twoPC} {
		p := "ins/" + name + "/"
		key := func(s string) []byte { return []byte(p + s) }
		insert := func(txn kv.Txn, k, v string) {
			t.Helper()
			if err := txn.(kv.Inserter).Insert(key(k), []byte(v)); err != nil {
				t.Fatalf("%s: Insert(%s): %v", name, k, err)
			}
		}

		w := mustBegin(t, store, kv.TxnOptions{})
		insert(w, "a", "1")
		_ = w.Set(key("gone"), []byte("x"))
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("%s: insert of a new key: %v", name, err)
		}
		del := mustBegin(t, store, kv.TxnOptions{})
		_ = del.Delete(key("gone"))
		if err := del.Commit(ctx); err != nil {
			t.Fatal(err)
		}

		// "a" has a value: the commit fails and writes neither key.
		dup := mustBegin(t, store, kv.TxnOptions{})
		_ = dup.Set(key("b"), []byte("2"))
		insert(dup, "a", "again")
		err := dup.Commit(ctx)
		var ke *kv.KeyExistsError
		if !errors.As(err, &ke) || string(ke.Key) != p+"a" {
			t.Fatalf("%s: commit over an existing key: %v, want KeyExistsError for %sa", name, err, p)
		}
		r := mustBegin(t, store, kv.TxnOptions{})
		if a, b := mustGet(t, r, p+"a"), mustGet(t, r, p+"b"); a != "1" || b != "<none>" {
			t.Fatalf("%s: after the failed commit a=%s b=%s, want 1 and <none>", name, a, b)
		}

		// A deleted key may be inserted again.
		again := mustBegin(t, store, kv.TxnOptions{})
		insert(again, "gone", "back")
		if err := again.Commit(ctx); err != nil {
			t.Fatalf("%s: insert over a deleted key: %v", name, err)
		}

		// Within one transaction: over its own value Insert fails at once,
		// over its own delete it is a plain write, and an inserted key
		// deleted again is still checked.
		own := mustBegin(t, store, kv.TxnOptions{})
		_ = own.Set(key("c"), []byte("3"))
		if err := own.(kv.Inserter).Insert(key("c"), []byte("4")); !errors.As(err, &ke) {
			t.Fatalf("%s: Insert over a buffered value: %v", name, err)
		}
		_ = own.Delete(key("a"))
		insert(own, "a", "replaced")
		if err := own.Commit(ctx); err != nil {
			t.Fatalf("%s: insert over the transaction's own delete: %v", name, err)
		}
		check := mustBegin(t, store, kv.TxnOptions{})
		insert(check, "a", "x")
		_ = check.Delete(key("a"))
		_ = check.Set(key("d"), []byte("5"))
		if err := check.Commit(ctx); !errors.As(err, &ke) {
			t.Fatalf("%s: inserted-then-deleted key over a value: %v, want KeyExistsError", name, err)
		}
		r = mustBegin(t, store, kv.TxnOptions{})
		if a, d, g := mustGet(t, r, p+"a"), mustGet(t, r, p+"d"), mustGet(t, r, p+"gone"); a != "replaced" || d != "<none>" || g != "back" {
			t.Fatalf("%s: a=%s d=%s gone=%s, want replaced <none> back", name, a, d, g)
		}
	}
}
