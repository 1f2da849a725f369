package anonymize

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report says what an anonymization did: rows, and which fields it kept,
// hashed and dropped. It holds column names and counts, never a value.
type Report struct {
	Input  string `json:"input"`
	Format string `json:"format"`
	Output string `json:"output"`

	Rows struct {
		Read    int `json:"read"`
		Written int `json:"written"`
		Skipped int `json:"skipped"`
	} `json:"rows"`

	// Kept and Hashed are output fields with the input column feeding
	// each (empty when a trace reader maps it) and the written rows that
	// have it. Dropped are input columns with the rows that had a value.
	Kept    []ColumnCount `json:"kept"`
	Hashed  []ColumnCount `json:"hashed"`
	Dropped []ColumnCount `json:"dropped"`
	// DroppedUnlisted counts further dropped column names, not listed
	// (past the listing limit: a log keyed by data rather than a schema).
	DroppedUnlisted int `json:"dropped_unlisted,omitempty"`
	// DroppedNote, when set, says what was dropped where the source
	// cannot list it (a trace reader reads only its format's columns).
	DroppedNote string `json:"dropped_note,omitempty"`

	// Skips are the first MaxLoggedSkips skipped rows.
	Skips []RowError `json:"skips,omitempty"`

	Time struct {
		Rebased     bool    `json:"rebased"`
		ResolutionS float64 `json:"resolution_s"` // 0: not coarsened
	} `json:"time"`
	TokenBucket int `json:"token_bucket"` // 0: exact counts

	Pseudonyms struct {
		Scheme    string  `json:"scheme"`
		HexChars  int     `json:"hex_chars"`
		Bits      int     `json:"bits"`
		MaxIDs    int     `json:"max_ids"` // an upper bound on the distinct ids of one field
		Collision float64 `json:"collision_bound"`
	} `json:"pseudonyms"`
}

// MarshalJSON of a RowError: line, column, reason.
func (e RowError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Line   int    `json:"line"`
		Column string `json:"column,omitempty"`
		Reason string `json:"reason"`
	}{e.Line, e.Column, e.Reason})
}

func (r *Report) fill(src Source, c *fieldCounts, cfg Config, rebased bool) {
	var mapped map[string]string
	if m, ok := src.(mapper); ok {
		mapped = m.Mapped()
	}
	col := func(field string, rows int) ColumnCount {
		return ColumnCount{Field: field, Column: mapped[field], Rows: rows}
	}
	has := func(field string, rows int) bool { return rows > 0 || mapped[field] != "" }
	w := r.Rows.Written
	r.Kept = []ColumnCount{col(FieldT, w), col(FieldInput, w), col(FieldOutput, w)}
	for _, f := range []struct {
		name string
		rows int
	}{{FieldModel, c.model}, {FieldClass, c.class}, {"deadline_s", c.deadline}, {"service_s", c.service}} {
		if has(f.name, f.rows) {
			r.Kept = append(r.Kept, col(f.name, f.rows))
		}
	}
	r.Hashed = []ColumnCount{}
	for f := range numFields {
		if has(f.String(), c.ids[f]) {
			r.Hashed = append(r.Hashed, col(f.String(), c.ids[f]))
		}
	}
	if c.blocks > 0 {
		r.Hashed = append(r.Hashed, col("blocks", c.blocks))
	}
	r.Dropped = []ColumnCount{}
	if d, ok := src.(dropper); ok {
		if r.Dropped, r.DroppedUnlisted = d.Dropped(); r.Dropped == nil {
			r.Dropped = []ColumnCount{}
		}
	} else {
		r.DroppedNote = "every column the " + r.Format + " reader does not read into a field above"
	}
	if cfg.DropBlocks {
		r.Dropped = append(r.Dropped, ColumnCount{Column: "blocks"})
	}

	r.Time.Rebased = rebased
	r.Time.ResolutionS = cfg.Resolution.Seconds()
	if cfg.BucketTokens > 1 {
		r.TokenBucket = cfg.BucketTokens
	}
	p := &r.Pseudonyms
	p.Scheme = "HMAC-SHA256(key, field || 0x00 || id)"
	p.HexChars, p.Bits = cfg.IDHexChars, 4*cfg.IDHexChars
	for _, n := range c.ids {
		p.MaxIDs = max(p.MaxIDs, n)
	}
	p.Collision = CollisionBound(p.MaxIDs, cfg.IDHexChars)
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "anonymized %s (%s) -> %s\n", r.Input, r.Format, r.Output)
	fmt.Fprintf(&b, "rows: %d read, %d written, %d skipped\n", r.Rows.Read, r.Rows.Written, r.Rows.Skipped)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	from := func(c ColumnCount) string {
		if c.Column == "" {
			return ""
		}
		return "<- " + quoteName(c.Column)
	}
	var notes []string
	if r.Time.Rebased {
		notes = append(notes, "rebased: the first request at 0")
	}
	if r.Time.ResolutionS > 0 {
		notes = append(notes, fmt.Sprintf("floored to %gs", r.Time.ResolutionS))
	}
	fmt.Fprintf(tw, "kept:\n")
	for _, c := range r.Kept {
		note := ""
		switch {
		case c.Field == FieldT && len(notes) > 0:
			note = strings.Join(notes, "; ")
		case (c.Field == FieldInput || c.Field == FieldOutput) && r.TokenBucket > 1:
			note = fmt.Sprintf("rounded up to a multiple of %d", r.TokenBucket)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d rows\t%s\n", c.Field, from(c), c.Rows, note)
	}
	p := r.Pseudonyms
	fmt.Fprintf(tw, "hashed:\n")
	for _, c := range r.Hashed {
		fmt.Fprintf(tw, "  %s\t%s\t%d rows\t\n", c.Field, from(c), c.Rows)
	}
	if len(r.Hashed) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	if p.MaxIDs > 0 {
		fmt.Fprintf(tw, "  ids are %s, %d hex chars (%d bits): collision probability <= %.2g for %d ids\n",
			p.Scheme, p.HexChars, p.Bits, p.Collision, p.MaxIDs)
	}
	fmt.Fprintf(tw, "dropped:\n")
	if r.DroppedNote != "" {
		fmt.Fprintf(tw, "  %s\n", r.DroppedNote)
	}
	for _, c := range r.Dropped {
		fmt.Fprintf(tw, "  %s\t\t%d rows\t\n", quoteName(c.Column), c.Rows)
	}
	if r.DroppedUnlisted > 0 {
		fmt.Fprintf(tw, "  and %d more columns, not listed\n", r.DroppedUnlisted)
	}
	if len(r.Dropped) == 0 && r.DroppedNote == "" && r.DroppedUnlisted == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Rows.Skipped > len(r.Skips) {
		fmt.Fprintf(&b, "skipped rows (the first %d of %d):\n", len(r.Skips), r.Rows.Skipped)
	} else if r.Rows.Skipped > 0 {
		fmt.Fprintf(&b, "skipped rows:\n")
	}
	for i := range r.Skips {
		fmt.Fprintf(&b, "  %v\n", &r.Skips[i])
	}
	// tabwriter pads the last cell; trim it.
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		if t := strings.TrimRight(l, " \n"); len(t) < len(l) && strings.HasSuffix(l, "\n") {
			lines[i] = t + "\n"
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}
