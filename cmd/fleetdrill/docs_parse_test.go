package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The docs test's reading of markdown: if it split commands wrongly or
// matched any output, TestDocsCommands would pass docs that do not run.

func TestDocBlockCommands(t *testing.T) {
	text := "intro\n\n<!-- docs-test: needs docker -->\n```sh\nfleetdrill run --live\n```\n\n" +
		"```sh\n# a comment line\nfleetdrill run \\\n  --seed 7   # summary\n" +
		"fleetdrill plan default --set 'expect=[\"a\",\n   \"b\"]'   # late: exit 1\n" +
		"fleetdrill node --listen 127.0.0.1:1 &\necho '# not a comment' # (exit 2)\n```\n\n" +
		"```console\n$ fleetdrill scenarios validate bad.yaml\nbad.yaml:3: seed: got -1\n\nexit 2\n\n$ true\n```\n"
	blocks, problems := readDocBlocks("x.md", text)
	require.Empty(t, problems)
	require.Len(t, blocks, 3)
	require.Equal(t, "needs docker", blocks[0].skip)
	require.Equal(t, 4, blocks[0].line)

	cmds, err := blocks[1].commands()
	require.NoError(t, err)
	require.Len(t, cmds, 4)
	require.Equal(t, "fleetdrill run \\\n  --seed 7", cmds[0].text)
	require.Equal(t, 0, cmds[0].exit)
	require.Equal(t, 10, cmds[0].line)
	require.Equal(t, "fleetdrill plan default --set 'expect=[\"a\",\n   \"b\"]'", cmds[1].text)
	require.Equal(t, 1, cmds[1].exit)
	require.True(t, cmds[2].background)
	require.Equal(t, "fleetdrill node --listen 127.0.0.1:1", cmds[2].text)
	require.Equal(t, "echo '# not a comment'", cmds[3].text)
	require.Equal(t, 2, cmds[3].exit)

	cmds, err = blocks[2].commands()
	require.NoError(t, err)
	require.Len(t, cmds, 2)
	require.Equal(t, "fleetdrill scenarios validate bad.yaml", cmds[0].text)
	require.Equal(t, 2, cmds[0].exit)
	require.Equal(t, []string{"bad.yaml:3: seed: got -1"}, cmds[0].want)
	require.Equal(t, "true", cmds[1].text)
	require.Empty(t, cmds[1].want)
}

func TestDocBlockProblems(t *testing.T) {
	for _, tt := range []struct{ name, text, want string }{
		{"unlabelled command", "```\nfleetdrill run\n```\n", "without a language"},
		{"unlabelled prompt", "```\n$ fleetdrill run\n```\n", "without a language"},
		{"unknown reason", "<!-- docs-test: slow -->\n```sh\nfleetdrill run\n```\n", `marker "slow"`},
		{"bare needs", "<!-- docs-test: needs -->\n```sh\nfleetdrill run\n```\n", `marker "needs"`},
		{"marker on yaml", "<!-- docs-test: illustrative -->\n```yaml\na: 1\n```\n", "never runs"},
		{"file marker on sh", "<!-- docs-test: file a.yaml -->\n```sh\nfleetdrill run\n```\n", "writes a file"},
		{"unclosed", "```sh\nfleetdrill run\n", "never closed"},
		{"indented commands", "text:\n\n    fleetdrill run\n", "an indented block of commands"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := readDocBlocks("x.md", tt.text)
			require.Len(t, problems, 1)
			require.Contains(t, problems[0], tt.want)
		})
	}
	// A text block may show a synopsis; a marker after a blank line still
	// counts; a file marker names the block's file.
	blocks, problems := readDocBlocks("x.md", "```text\nfleetdrill run SCENARIO [--live]\n```\n"+
		"<!-- docs-test: file sweep.yaml -->\n\n```yaml\na: 1\n```\n")
	require.Empty(t, problems)
	require.Equal(t, "sweep.yaml", blocks[1].writes)

	// A fence in a list item is a fence, its lines unindented; four
	// backticks are inline code.
	blocks, problems = readDocBlocks("x.md", "- item:\n\n  ```sh\n  fleetdrill run\n  ```\n- ```` ```sh ```` text\n")
	require.Empty(t, problems)
	require.Len(t, blocks, 1)
	require.Equal(t, []string{"fleetdrill run"}, blocks[0].lines)

	// A marker is the block's after it, not the next one's too.
	blocks, problems = readDocBlocks("x.md", "<!-- docs-test: needs docker -->\n```sh\nfleetdrill run --live\n```\n```sh\nfleetdrill run\n```\n")
	require.Empty(t, problems)
	require.Equal(t, "needs docker", blocks[0].skip)
	require.Empty(t, blocks[1].skip)

	_, err := docBlock{file: "x.md", lang: "sh", lines: []string{"fleetdrill run --set 'a"}}.commands()
	require.ErrorContains(t, err, "open quote")
	_, err = docBlock{file: "x.md", lang: "console", lines: []string{"output first"}}.commands()
	require.ErrorContains(t, err, `starts with a "$ " command`)
}

func TestOutputHolds(t *testing.T) {
	got := "plan default\n  pool   replicas\n  use-h100-8b      4\ncost 78.30/h (today 75.50/h)\n" +
		"  trial: gpu-cloud-c is not in the fleet: the drills buy a trial\n82 runs in 2.4s on 2 workers\n"
	for _, tt := range []struct {
		name string
		want []string
		miss string
	}{
		{"in order, spaces loose", []string{"plan default", "use-h100-8b 4"}, ""},
		{"elided lines", []string{"plan default", "...", "cost 78.30/h (today 75.50/h)"}, ""},
		{"elision inside a line", []string{"cost ... (today 75.50/h)"}, ""},
		{"truncated line", []string{"  trial: gpu-cloud-c is not in the fleet…"}, ""},
		{"wall clock", []string{"82 runs in 9.9s on 16 workers"}, ""},
		{"run count still compared", []string{"83 runs in 2.4s on 2 workers"}, "83 runs in 2.4s on 2 workers"},
		{"a figure differs", []string{"cost 78.31/h (today 75.50/h)"}, "cost 78.31/h (today 75.50/h)"},
		{"a prefix is not the line", []string{"cost 78.30/h"}, "cost 78.30/h"},
		{"out of order", []string{"cost 78.30/h (today 75.50/h)", "plan default"}, "plan default"},
		{"each line once", []string{"plan default", "plan default"}, "plan default"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.miss, outputHolds(got, tt.want))
		})
	}
}
