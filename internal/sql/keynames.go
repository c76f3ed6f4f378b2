package sql

// TableName names a table's key range for consoles: the database and table
// whose id a key starts with, and the table's indexes by id.
type TableName struct {
	DB      string           `json:"db"`
	Table   string           `json:"table"`
	Indexes map[int64]string `json:"indexes,omitempty"`
}

// TableNames maps every table id of the engine's current schema to its
// names (views, which own no keys, are left out).
func (e *Engine) TableNames() map[int64]TableName {
	s := e.schema.Load()
	out := map[int64]TableName{}
	if s == nil {
		return out
	}
	for _, db := range s.DBNames() {
		for _, t := range s.Tables(db) {
			if t.ViewSQL != "" {
				continue
			}
			tn := TableName{DB: db, Table: t.Name}
			for _, ix := range t.Indexes {
				if tn.Indexes == nil {
					tn.Indexes = map[int64]string{}
				}
				tn.Indexes[ix.ID] = ix.Name
			}
			out[t.ID] = tn
		}
	}
	return out
}
