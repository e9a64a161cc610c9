package status

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgquectl/pgquectl/internal/db"
)

// Section names as they appear in checks and headings.
const (
	SectionEngine      = "engine"
	SectionQueues      = "queues"
	SectionConsumers   = "consumers"
	SectionBloat       = "bloat"
	SectionWAL         = "wal"
	SectionXmin        = "xmin"
	SectionCron        = "cron"
	SectionNotify      = "notify"
	SectionConnections = "connections"
	SectionDatabase    = "database"
)

// finish flattens the sections into r.Checks, sets r.Level and r.Summary.
func finish(r *Report) {
	r.Checks = nil
	add := func(section, name string, v Verdict) {
		r.Checks = append(r.Checks, Check{Section: section, Name: name, Verdict: v})
	}
	problems := func(section string, ps []Problem) {
		for _, p := range ps {
			reason := "cannot read " + p.What
			if p.Fix != "" {
				reason += "; fix: " + p.Fix
			}
			if p.Error != "" && p.Fix == "" {
				reason += ": " + p.Error
			}
			add(section, "unreadable", Verdict{Level: Unknown, Reason: reason})
		}
	}
	if r.Error != "" {
		add(SectionDatabase, "connection", Verdict{Level: Unknown, Reason: r.Error})
	} else {
		add(SectionEngine, "engine", r.Engine.Verdict)
		problems(SectionEngine, r.Engine.Problems)
		for _, q := range r.Queues.Rows {
			add(SectionQueues, "queue "+q.Name, q.Verdict)
		}
		problems(SectionQueues, r.Queues.Problems)
		for _, c := range r.Consumers.Rows {
			add(SectionConsumers, "consumer "+c.Queue+"/"+c.Consumer, c.Verdict)
		}
		problems(SectionConsumers, r.Consumers.Problems)
		for _, f := range r.Bloat.Families {
			add(SectionBloat, "dead tuples "+string(f.Kind), f.Verdict)
		}
		problems(SectionBloat, r.Bloat.Problems)
		if len(r.WAL.Problems) == 0 {
			r.WAL.Verdict = walVerdict(r.WAL, r.Thresholds)
			add(SectionWAL, "wal rate", r.WAL.Verdict)
		}
		problems(SectionWAL, r.WAL.Problems)
		add(SectionXmin, "xmin horizon", r.Xmin.Oldest)
		for _, s := range r.Xmin.Slots {
			if s.Level != OK {
				add(SectionXmin, "slot "+s.Name, s.Verdict)
			}
		}
		problems(SectionXmin, r.Xmin.Problems)
		for _, j := range r.Cron.Jobs {
			add(SectionCron, "cron job "+j.Name, j.Verdict)
		}
		if r.Cron.Access.Installed && r.Cron.Access.SchemaUsage {
			add(SectionCron, "cron running jobs", r.Cron.RunningVerdict)
			add(SectionCron, "cron run history", r.Cron.History)
		}
		add(SectionCron, "ticking", r.Cron.Ticking)
		problems(SectionCron, r.Cron.Problems)
		for _, sc := range serverChecks {
			v, ps := sc.result(r)
			if len(ps) == 0 {
				add(sc.section, sc.name, v)
			}
			problems(sc.section, ps)
		}
	}
	r.Level = OK
	for _, c := range r.Checks {
		r.Level = Worst(r.Level, c.Level)
	}
	r.Summary = summary(r)
}

// summary is the one-line form: the overall level, the counts, then the
// reasons of the checks at the overall level (CRIT first).
func summary(r *Report) string {
	counts := map[Level]int{}
	for _, c := range r.Checks {
		counts[c.Level]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "PGQUE %s - ", r.Level)
	if r.Session != nil {
		fmt.Fprintf(&b, "database %s: ", r.Session.Database)
	}
	fmt.Fprintf(&b, "%d checks: %d OK, %d WARN, %d CRIT, %d UNKNOWN", len(r.Checks), counts[OK], counts[Warn], counts[Crit], counts[Unknown])
	var bad []string
	for _, lvl := range []Level{Crit, Warn, Unknown} {
		for _, c := range r.Checks {
			if c.Level == lvl {
				bad = append(bad, fmt.Sprintf("%s %s: %s", c.Level, c.Name, c.Reason))
			}
		}
	}
	if len(bad) > 0 {
		b.WriteString(" -- ")
		b.WriteString(strings.Join(bad, "; "))
	}
	return strings.ReplaceAll(b.String(), "\n", " ")
}

// serverCheck is one check of the SERVER table as one unit: its file
// (check_<name>.go) holds the query it runs, the thresholds it compares
// with, the judgement, the section it fills in the report and the row it
// shows, and registers itself in serverChecks. The collector, the check
// list (--check, JSON checks[]) and the table all iterate over
// serverChecks, so adding such a check touches no other code (its
// thresholds still need fields in Thresholds and the Report a field for
// its JSON section).
type serverCheck struct {
	name    string // check name and row label, e.g. "notify queue"
	section string // Section* constant
	// collect runs the query, judges the value and stores both (or a
	// problem) in the report.
	collect func(ctx context.Context, q db.Querier, r *Report)
	// result returns the verdict and the problems stored by collect.
	result func(r *Report) (Verdict, []Problem)
	// value is the row's value column.
	value func(r *Report) string
}

// serverChecks lists the SERVER checks in display order; each check's
// file appends to it from init (file names sort in display order).
var serverChecks []serverCheck
