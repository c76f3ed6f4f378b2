package plan

// SetColumns sets the output columns of a Values node built outside the
// planner (LOAD DATA's batches of rows).
func SetColumns(p Plan, cols []*Column) {
	if v, ok := p.(*Values); ok {
		v.cols = cols
	}
}
