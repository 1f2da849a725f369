package gateway

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/signals"
)

// dashboardFile is the Grafana dashboard of the catalogue's series
// (docs/metrics.md says how to load it).
const dashboardFile = "../../docs/grafana/fleetdrill.json"

// dashboardExtras are the series the dashboard may read beyond the
// catalogue (docs/metrics.md lists them): none so far, so that every panel
// reads live and simulated data alike.
var dashboardExtras []string

type dashPanel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a collapsed row's
}

type dashboard struct {
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// The dashboard reads only series somebody exports (the catalogue, or a
// documented extra), shows every catalogue series, and takes its data
// source from the ${DS_PROMETHEUS} variable.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	assert.GreaterOrEqual(t, d.SchemaVersion, 36)

	allowed := map[string]string{} // series name → catalogue name
	for _, s := range signals.All {
		if s.Type == signals.Histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				allowed[s.Name+suffix] = s.Name
			}
			continue
		}
		allowed[s.Name] = s.Name
	}
	for _, name := range dashboardExtras {
		allowed[name] = name
	}
	used := map[string]bool{}
	// check checks the series expr reads and returns how many it reads.
	check := func(where, expr string) int {
		names := promqlMetrics(expr)
		for _, name := range names {
			base, ok := allowed[name]
			assert.True(t, ok, "%s: %q reads %s, which neither internal/signals nor dashboardExtras names", where, expr, name)
			used[base] = true
		}
		return len(names)
	}

	var ds bool
	for _, v := range d.Templating.List {
		if v.Name == "DS_PROMETHEUS" {
			ds = v.Type == "datasource" && string(v.Query) == `"prometheus"`
		}
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		require.NoError(t, json.Unmarshal(v.Query, &q), "variable %s", v.Name)
		m := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`).FindStringSubmatch(q.Query)
		if assert.NotNil(t, m, "variable %s: %q, want label_values(METRIC, LABEL)", v.Name, q.Query) {
			_, ok := allowed[m[1]]
			assert.True(t, ok, "variable %s reads %s, which nobody exports", v.Name, m[1])
		}
	}
	assert.True(t, ds, "no DS_PROMETHEUS variable of type datasource (query prometheus)")

	var walk func([]dashPanel)
	panels := 0
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			panels++
			if assert.NotNil(t, p.Datasource, "panel %q: no datasource", p.Title) {
				assert.Equal(t, "${DS_PROMETHEUS}", p.Datasource.UID, "panel %q", p.Title)
			}
			n := 0
			for _, tg := range p.Targets {
				n += check("panel "+p.Title, tg.Expr)
			}
			assert.NotZero(t, n, "panel %q reads no series", p.Title)
		}
	}
	walk(d.Panels)
	assert.NotZero(t, panels)
	for _, s := range signals.All {
		assert.True(t, used[s.Name], "no panel shows %s", s.Name)
	}
}

// promqlKeywords are PromQL words that are not series names.
var promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
	"and", "or", "unless", "atan2", "inf", "nan"}

// promqlAggregations are PromQL's aggregation operators, which may take
// their grouping before their arguments: sum by (le) (...).
var promqlAggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// promqlMetrics returns the series names a PromQL expression reads: the
// identifiers outside strings, label matchers ({...}), ranges ([...]) and
// grouping lists, that do not call a function or aggregation. Grafana
// variables ($name, ${name}) are not names. Good enough for the
// dashboard's queries; not a PromQL parser.
func promqlMetrics(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// skipString returns the index after the string that starts at i.
	skipString := func(i int) int {
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	// skipTo returns the index after the close that balances the open at
	// i, skipping strings.
	skipTo := func(i int, open, close byte) int {
		depth := 0
		for ; i < len(expr); i++ {
			switch c := expr[i]; c {
			case '"', '\'', '`':
				i = skipString(i) - 1
			case open:
				depth++
			case close:
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				i = skipTo(i, '{', '}')
				continue
			}
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := nextNonSpace(j)
			switch {
			case slices.Contains(promqlKeywords, word):
				if k < len(expr) && expr[k] == '(' {
					j = skipTo(k, '(', ')') // a grouping list
				}
			case k < len(expr) && expr[k] == '(':
				// a function or aggregation: its arguments follow
			case slices.Contains(promqlAggregations, word) && (strings.HasPrefix(expr[k:], "by") || strings.HasPrefix(expr[k:], "without")):
				// an aggregation, its grouping first
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestPromqlMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (le, class) (rate(gen_ai_server_time_to_first_token_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			[]string{"gen_ai_server_time_to_first_token_seconds_bucket"}},
		{`vector($ttft_slo)`, nil},
		{`sum(rate(a_total{x="by (y)", z='w{'}[5m])) by (pool) / on (pool) group_left (region) b`, []string{"a_total", "b"}},
		{`max by (pool, replica) (fleetdrill_breaker_state) > bool 1e3`, []string{"fleetdrill_breaker_state"}},
		{`x offset 5m or ${var} and y_2:rule`, []string{"x", "y_2:rule"}},
	} {
		assert.Equal(t, tc.want, promqlMetrics(tc.expr), "promqlMetrics(%q)", tc.expr)
	}
}
