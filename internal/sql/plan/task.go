package plan

// Tasker is implemented by plan nodes that say where they run. EXPLAIN's
// tree (FORMAT=TREE, EXPLAIN ANALYZE) shows a non-empty Task after the
// node, as TiDB's task column does: "cop[strata]" for a node the
// coprocessor evaluates next to the data. Nodes without it, or with an
// empty Task, run in the SQL layer.
type Tasker interface {
	Task() string
}

// TaskOf returns where p runs ("" for the SQL layer).
func TaskOf(p Plan) string {
	if t, ok := p.(Tasker); ok {
		return t.Task()
	}
	return ""
}
