package status

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pgquectl/pgquectl/internal/db"
)

// WriteJSON writes the whole report as indented JSON. Every list is a
// JSON array, empty rather than null, so `jq '.xmin.slots[]'` works on
// any report.
func (r *Report) WriteJSON(w io.Writer) error {
	r.SchemaVersion = SchemaVersion
	emptyLists(reflect.ValueOf(r))
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	return nil
}

// emptyLists replaces every nil slice reachable from v (through pointers,
// structs and slice elements) by an empty one.
func emptyLists(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			emptyLists(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				emptyLists(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := range v.Len() {
			emptyLists(v.Index(i))
		}
	}
}

// WriteSummary writes the one-line summary (--check).
func (r *Report) WriteSummary(w io.Writer) error {
	_, err := fmt.Fprintln(w, r.Summary)
	return err
}

// tableWriter renders the sections, remembering the first write error.
type tableWriter struct {
	w    io.Writer
	err  error
	wide bool // -o wide: every column
}

func (t *tableWriter) printf(format string, a ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, a...)
	}
}

// col is one column of a table: its header and whether only -o wide shows it.
type col struct {
	name string
	wide bool
}

// table writes rows under header as aligned columns (two spaces apart, no
// borders: grep- and terminal-friendly), leaving out the wide-only columns
// unless t.wide.
func (t *tableWriter) table(header []col, rows [][]string) {
	if t.err != nil {
		return
	}
	var keep []int
	for i, h := range header {
		if t.wide || !h.wide {
			keep = append(keep, i)
		}
	}
	width := make([]int, len(keep))
	cell := func(row []string, i int) string {
		if i < len(row) {
			return row[i]
		}
		return ""
	}
	for k, i := range keep {
		width[k] = utf8.RuneCountInString(header[i].name)
		for _, r := range rows {
			width[k] = max(width[k], utf8.RuneCountInString(cell(r, i)))
		}
	}
	line := func(cells func(i int) string) {
		var b strings.Builder
		b.WriteString("  ")
		for k, i := range keep {
			c := cells(i)
			b.WriteString(c)
			if k < len(keep)-1 {
				b.WriteString(strings.Repeat(" ", width[k]-utf8.RuneCountInString(c)+2))
			}
		}
		t.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
	line(func(i int) string { return strings.ToUpper(header[i].name) })
	for _, r := range rows {
		line(func(i int) string { return cell(r, i) })
	}
}

// notes prints the reason of every non-OK row and the section's problems.
func (t *tableWriter) notes(checks []Check, problems []Problem) {
	for _, c := range checks {
		if c.Level != OK {
			t.printf("  %-7s %s: %s\n", c.Level, c.Name, c.Reason)
		}
	}
	for _, p := range problems {
		line := "  UNKNOWN could not read " + p.What
		if p.Fix != "" {
			line += "; fix: " + p.Fix
		}
		if p.Error != "" {
			line += " (" + p.Error + ")"
		}
		t.printf("%s\n", line)
	}
}

// WriteTable writes the report as a heading plus one table per section,
// with the columns that fit 120 characters (see WriteWide for all).
func (r *Report) WriteTable(w io.Writer) error { return r.writeTable(w, false) }

// WriteWide writes the report like WriteTable with every column (-o wide).
func (r *Report) WriteWide(w io.Writer) error { return r.writeTable(w, true) }

func (r *Report) writeTable(w io.Writer, wide bool) error {
	t := &tableWriter{w: w, wide: wide}
	if r.Error != "" {
		t.printf("pgquectl status %s: %s\n", r.Level, r.Error)
		return t.err
	}
	s := r.Session
	t.printf("pgquectl status: %s — database %s, user %s, at %s\n",
		r.Level, s.Database, s.User, r.Time.UTC().Format(time.RFC3339))
	t.printf("  PostgreSQL %s, engine %s\n", s.ServerVersion, orDash(r.Engine.Version))
	t.notes(r.checksOf(SectionEngine), r.Engine.Problems)

	t.printf("\nQUEUES\n")
	if len(r.Queues.Rows) == 0 && len(r.Queues.Problems) == 0 {
		t.printf("  no queues\n")
	} else if len(r.Queues.Rows) > 0 {
		rows := make([][]string, 0, len(r.Queues.Rows))
		for _, q := range r.Queues.Rows {
			rows = append(rows, []string{q.Name, q.Level.String(), intp(q.PendingEvents), intp(q.NewEvents), floatp(q.EventsPerSec, 1),
				secp(q.TickerLag), dur(q.ExpectedTickEvery), intp(q.TicksInSample), intp(q.LastTickID),
				secp(q.SinceRotation) + " / " + dur(q.RotationPeriod), metaRotation(r), pinned(q)})
		}
		t.table([]col{{"queue", false}, {"status", false}, {"pending", false}, {"unticked", false}, {"ev/s", true},
			{"last tick", false}, {"tick every", false}, {"ticks in sample", true}, {"tick id", true},
			{"rotated / every", false}, {"meta rotation every / last", true}, {"pinned by", false}}, rows)
	}
	t.notes(r.checksOf(SectionQueues), r.Queues.Problems)

	t.printf("\nCONSUMERS\n")
	if len(r.Consumers.Rows) == 0 && len(r.Consumers.Problems) == 0 {
		t.printf("  no consumers\n")
	} else if len(r.Consumers.Rows) > 0 {
		rows := make([][]string, 0, len(r.Consumers.Rows))
		for _, c := range r.Consumers.Rows {
			rows = append(rows, []string{c.Queue, c.Consumer, c.Level.String(), intp(c.PendingEvents), secp(c.Lag),
				secp(c.LastSeen), intp(c.LastTick), intp(c.CurrentBatch)})
		}
		t.table([]col{{"queue", false}, {"consumer", false}, {"status", false}, {"pending", false}, {"lag", false},
			{"last seen", false}, {"last tick", true}, {"open batch", true}}, rows)
	}
	t.notes(r.checksOf(SectionConsumers), r.Consumers.Problems)

	t.printf("\nBLOAT (dead tuples: metadata by %s, event tables by pg_stat_user_tables)\n", orDash(r.Bloat.MetadataMethod))
	if len(r.Bloat.Families) > 0 {
		rows := make([][]string, 0, len(r.Bloat.Families))
		for _, f := range r.Bloat.Families {
			critAt := "-"
			if f.CritAt > 0 {
				critAt = strconv.FormatInt(f.CritAt, 10)
			}
			rows = append(rows, []string{string(f.Kind), f.Level.String(), strconv.Itoa(f.Tables), i64(f.LiveTuples),
				i64(f.DeadTuples), i64(f.Bound), critAt, f.WorstName, bytesText(float64(f.SizeBytes))})
		}
		t.table([]col{{"family", false}, {"status", false}, {"tables", true}, {"live", false}, {"dead", false},
			{"warn above", false}, {"crit from", true}, {"most dead in", false}, {"size", false}}, rows)
	} else if len(r.Bloat.Problems) == 0 {
		t.printf("  no pgque tables\n")
	}
	t.notes(r.checksOf(SectionBloat), r.Bloat.Problems)

	t.printf("\nWAL\n")
	if r.WAL.Rate != nil {
		w := r.WAL
		t.table([]col{{"status", false}, {"bytes/s", false}, {"bytes", true}, {"over", false}, {"xids/s", false},
			{"records", true}, {"full pages", true}, {"ticks", false}, {"ticking share (est.)", false}},
			[][]string{{w.Level.String(), bytesText(w.Rate.BytesPerSec) + "/s", i64(w.Rate.Bytes), dur(w.Rate.Seconds),
				strconv.FormatFloat(w.Rate.XIDsPerSec, 'f', 1, 64), i64(w.Rate.Records), i64(w.Rate.FPI), i64(w.Ticks),
				fmt.Sprintf("%.0f%% (%s)", w.TickShare*100, bytesText(float64(w.TickBytes)))}})
	} else if len(r.WAL.Problems) == 0 {
		t.printf("  not sampled (--sample 0)\n")
	}
	t.notes(r.checksOf(SectionWAL), r.WAL.Problems)

	t.printf("\nXMIN HORIZON\n")
	x := r.Xmin
	if len(x.Backends)+len(x.Slots)+len(x.Prepared) == 0 {
		t.printf("  nothing holds the horizon\n")
	} else {
		var rows [][]string
		for _, b := range x.Backends {
			rows = append(rows, []string{b.XminHolder, strconv.Itoa(int(b.PID)), b.User, b.Application, b.Database,
				orDash(b.State), orDash(db.Deref(b.BackendXmin)) + xidText(b.BackendXID), secp(b.XactAge),
				i64(b.XminAgeXIDs), b.Level.String()})
		}
		for _, p := range x.Prepared {
			rows = append(rows, []string{"prepared " + p.GID, "-", p.Owner, "-", p.Database, "prepared", p.XID,
				dur(p.Age), i64(p.AgeXIDs), p.Level.String()})
		}
		for _, s := range x.Slots {
			xmin := orDash(db.Deref(s.Xmin))
			if s.CatalogXmin != nil {
				xmin += " (catalog " + *s.CatalogXmin + ")"
			}
			state := "inactive"
			if s.Active {
				state = "active"
			}
			rows = append(rows, []string{s.Type + " slot " + s.Name, pidp(s.ActivePID), "-", "-", orDash(s.Database),
				state, xmin, "?", i64(max(db.Deref(s.XminAgeXIDs), db.Deref(s.CatalogAgeXIDs))), s.Level.String()})
		}
		t.table([]col{{"holder", false}, {"pid", false}, {"user", false}, {"application", true}, {"database", true},
			{"state", false}, {"xmin / xid", true}, {"age", false}, {"age (xids)", false}, {"status", false}}, rows)
	}
	var xminChecks []Check
	for _, b := range x.Backends {
		if b.Level != OK && b.Level != Unknown {
			xminChecks = append(xminChecks, Check{SectionXmin, "xmin holder", b.Verdict})
		}
	}
	for _, p := range x.Prepared {
		if p.Level != OK {
			xminChecks = append(xminChecks, Check{SectionXmin, "prepared " + p.GID, p.Verdict})
		}
	}
	for _, s := range x.Slots {
		if s.Level != OK {
			xminChecks = append(xminChecks, Check{SectionXmin, "slot " + s.Name, s.Verdict})
		}
	}
	t.notes(xminChecks, x.Problems)

	c := r.Cron
	t.printf("\nPG_CRON / TICKER\n")
	switch {
	case !c.Settings.Loaded:
		t.printf("  pg_cron is not loaded in this server\n")
	case !c.Access.Installed && len(c.Problems) == 0:
		t.printf("  pg_cron is loaded but not created in its database %s\n", c.Settings.DatabaseName)
	case len(c.Jobs) == 0 && len(c.Problems) == 0:
		t.printf("  no pgque jobs for database %s in pg_cron (database %s)\n", r.Session.Database, c.Settings.DatabaseName)
	}
	if len(c.Jobs) > 0 {
		rows := make([][]string, 0, len(c.Jobs))
		for _, j := range c.Jobs {
			rows = append(rows, []string{strings.TrimSuffix(j.Name, "@"+r.Session.Database), j.Level.String(), j.Schedule, strconv.FormatBool(j.Active),
				orDash(j.LastStatus), secp(j.SinceLastRun), fmt.Sprintf("%d / %d / %d", j.Runs, j.Succeeded, j.Failed),
				strconv.FormatInt(j.Running, 10)})
		}
		t.printf("  jobs of database %s (named <job>@%s)\n", r.Session.Database, r.Session.Database)
		t.table([]col{{"job", false}, {"status", false}, {"schedule", false}, {"active", true}, {"last run", false},
			{"last good start", false}, {"runs / ok / failed (" + dur(r.Thresholds.CronWindow.Seconds()) + ")", false}, {"running", true}}, rows)
	}
	if len(c.Daemon) > 0 {
		rows := make([][]string, 0, len(c.Daemon))
		for _, h := range c.Daemon {
			role := "standby"
			if h.Granted {
				role = "leader"
			}
			started := "-"
			if h.BackendStart != nil {
				started = h.BackendStart.UTC().Format(time.RFC3339)
			}
			rows = append(rows, []string{role, strconv.Itoa(int(h.PID)), h.User, h.Application, h.ClientAddr, started})
		}
		t.table([]col{{"ticker daemon", false}, {"pid", false}, {"user", false}, {"application", false}, {"client", true},
			{"backend start", false}}, rows)
	}
	for _, ch := range r.checksOf(SectionCron) {
		if !strings.HasPrefix(ch.Name, "cron job ") && ch.Name != "unreadable" {
			t.printf("  %-7s %s: %s\n", ch.Level, ch.Name, ch.Reason)
		}
	}
	var jobChecks []Check
	for _, ch := range r.checksOf(SectionCron) {
		if strings.HasPrefix(ch.Name, "cron job ") {
			jobChecks = append(jobChecks, ch)
		}
	}
	t.notes(jobChecks, c.Problems)

	t.printf("\nSERVER\n")
	var rows [][]string
	var checks []Check
	var problems []Problem
	for _, sc := range serverChecks {
		v, ps := sc.result(r)
		if len(ps) == 0 {
			rows = append(rows, []string{sc.name, v.Level.String(), sc.value(r)})
		}
		checks = append(checks, r.checksOf(sc.section)...)
		problems = append(problems, ps...)
	}
	t.table([]col{{"check", false}, {"status", false}, {"value", false}}, rows)
	t.notes(checks, problems)
	t.printf("\n%s\n", r.Summary)
	return t.err
}

// checksOf returns the checks of one section except the "unreadable" ones
// (those are printed from the section's problems).
func (r *Report) checksOf(section string) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Section == section && c.Name != "unreadable" {
			out = append(out, c)
		}
	}
	return out
}

// metaRotation shows the metadata rotation period and the time since the
// last subscription-table rotation, each "-" when not readable.
func metaRotation(r *Report) string {
	period, last := "-", "-"
	if r.Engine.MetaRotationPeriod != nil {
		period = dur(*r.Engine.MetaRotationPeriod)
	}
	if r.Engine.LastMetaRotation != nil {
		last = dur(r.Time.Sub(*r.Engine.LastMetaRotation).Seconds())
	}
	return period + " / " + last
}

func pinned(q QueueRow) string {
	if q.PinnedBy == "" {
		return "-"
	}
	return q.PinnedBy + " (" + secp(q.PinnedByLag) + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func xidText(x *string) string {
	if x == nil {
		return ""
	}
	return " / xid " + *x
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func intp(p *int64) string {
	if p == nil {
		return "-"
	}
	return i64(*p)
}

func pidp(p *int32) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(int(*p))
}

func floatp(p *float64, prec int) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', prec, 64)
}

func secp(p *float64) string {
	if p == nil {
		return "-"
	}
	return dur(*p)
}
