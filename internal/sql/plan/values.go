package plan

import (
	"fmt"

	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Values produces constant rows: an INFORMATION_SCHEMA table, computed
// from the builder's schema snapshot when the statement is planned, or,
// when the builder has a Visible filter, each time the plan runs (the rows
// then depend on the session's privileges too, which may change while the
// schema version holds).
type Values struct {
	base
	Name string
	Rows [][]types.Datum
	// Fetch, when set, returns the rows each time the plan runs (a table
	// whose rows come from the cluster, not the schema).
	Fetch func() [][]types.Datum
}

func (*Values) Children() []Plan  { return nil }
func (v *Values) Explain() string { return fmt.Sprintf("Values %s rows=%d", v.Name, len(v.Rows)) }

// buildInfoSchema plans a table of INFORMATION_SCHEMA.
func (b *Builder) buildInfoSchema(sc *scope, name, alias string) (*leaf, error) {
	t := infoschema.Table(name)
	if t == nil {
		return nil, sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", infoschema.Name, name)
	}
	v := &Values{Name: infoschema.Name + "." + t.Name}
	if infoschema.IsProcessTable(t.Name) {
		src := b.Processes
		v.Fetch = func() [][]types.Datum {
			if src == nil {
				return nil
			}
			return src()
		}
	} else if infoschema.IsPrivilegeTable(t.Name) {
		src, name := b.Privileges, t.Name
		v.Fetch = func() [][]types.Datum {
			if src == nil {
				return nil
			}
			return src(name)
		}
	} else if infoschema.IsClusterTable(t.Name) {
		src, name := b.Cluster, t.Name
		v.Fetch = func() [][]types.Datum { return infoschema.ClusterRows(src, name) }
	} else if vis := b.Visible; vis != nil {
		schema, name, stats := b.Schema, t.Name, b.Stats
		v.Fetch = func() [][]types.Datum { return infoschema.Rows(schema, name, vis, stats) }
	} else {
		v.Rows = infoschema.Rows(b.Schema, t.Name, nil, b.Stats)
	}
	for _, c := range t.Columns {
		col := &Column{Name: c.Name, OrgName: c.Name, Table: alias, OrgTable: t.Name, DB: infoschema.Name, Type: c.Type}
		v.cols = append(v.cols, col)
		sc.add(infoschema.Name, alias, col)
	}
	return &leaf{plan: v, scope: sc}, nil
}

// infoSchemaTable reports whether db.name is an INFORMATION_SCHEMA table.
func infoSchemaTable(db string) bool { return infoschema.IsName(db) }
