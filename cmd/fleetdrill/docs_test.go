package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The docs' commands run: TestDocsCommands runs every ```sh and ```console
// block of README.md and docs/*.md with the built binary, as a reader
// pasting them would, and checks each command's exit status and, in a
// console block, that its output holds the lines the doc shows. The
// convention it holds the docs to is in docs/architecture.md ("Docs that
// run").

// docsMarker is the comment that keeps a command block from running:
// <!-- docs-test: needs docker --> on the line before its fence.
var docsMarker = regexp.MustCompile(`^<!--\s*docs-test:\s*(.*?)\s*-->$`)

// docBlock is one fenced block of a markdown file.
type docBlock struct {
	file   string // relative to the repository root
	line   int    // of the opening fence, 1-based
	lang   string // the fence's info string: sh, console, yaml, ""
	skip   string // the docs-test marker's reason; "" runs the block
	writes string // a "file NAME" marker's NAME: the block is written there
	lines  []string
}

func (b docBlock) name() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// runs says whether the block is one of commands.
func (b docBlock) runs() bool {
	switch b.lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// readDocBlocks returns the fenced blocks of a markdown file and the
// problems with its docs-test markers (a reason that is none of the
// convention's, a marker on a block that never runs, a command in a block
// without a language).
func readDocBlocks(file, text string) (blocks []docBlock, problems []string) {
	var cur *docBlock
	indent := ""   // the open fence's, in a list item: its lines' too
	lastText := "" // the last non-blank line outside a block
	lastBlank := true
	for i, line := range strings.Split(text, "\n") {
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, *cur)
				cur = nil
				lastText = "```" // a marker is the next block's only if it follows this one
				lastBlank = false
				continue
			}
			cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
			continue
		}
		trimmed := strings.TrimLeft(line, " ")
		// A fence is three backticks; four open an inline code span.
		if info, ok := strings.CutPrefix(trimmed, "```"); ok && !strings.HasPrefix(info, "`") {
			indent = line[:len(line)-len(trimmed)]
			cur = &docBlock{file: file, line: i + 1, lang: strings.TrimSpace(info)}
			if m := docsMarker.FindStringSubmatch(lastText); m != nil {
				if name, ok := strings.CutPrefix(m[1], "file "); ok && name != "" && !strings.ContainsAny(name, "/ ") {
					cur.writes = name
				} else if validSkipReason(m[1]) {
					cur.skip = m[1]
				} else {
					problems = append(problems, fmt.Sprintf("%s: docs-test marker %q: want \"needs WHAT\" (docker, a GPU, a real server, ...), "+
						"\"illustrative\" (\"illustrative: WHY\") or \"file NAME\"", cur.name(), m[1]))
				}
			}
			continue
		}
		// An indented code block (four spaces after a blank line) of
		// commands would never run: it must be fenced.
		if lastBlank && strings.HasPrefix(line, "    ") && startsWithCommand([]string{line}) {
			problems = append(problems, fmt.Sprintf("%s:%d: an indented block of commands: fence it ```sh or ```console, which the docs test runs", file, i+1))
		}
		lastBlank = strings.TrimSpace(line) == ""
		if !lastBlank {
			lastText = strings.TrimSpace(line)
		}
	}
	if cur != nil {
		problems = append(problems, cur.name()+": the block is never closed")
	}
	for _, b := range blocks {
		if b.writes != "" && b.runs() {
			problems = append(problems, fmt.Sprintf("%s: a docs-test file marker on a ```%s block: it writes a file (a ```yaml one), not commands", b.name(), b.lang))
		}
		if b.skip != "" && !b.runs() {
			problems = append(problems, fmt.Sprintf("%s: a docs-test marker on a ```%s block, which never runs: remove the marker", b.name(), b.lang))
		}
		if b.lang == "" && startsWithCommand(b.lines) {
			problems = append(problems, b.name()+": a block of commands without a language: fence it ```sh (commands) or ```console "+
				"($ commands and their output), which the docs test runs, or ```text for a synopsis")
		}
	}
	return blocks, problems
}

func validSkipReason(r string) bool {
	return r == "illustrative" || strings.HasPrefix(r, "illustrative: ") || (strings.HasPrefix(r, "needs ") && len(r) > len("needs "))
}

// startsWithCommand: the block's first line is a command a reader would
// paste.
func startsWithCommand(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		for _, p := range []string{"$ ", "fleetdrill ", "./fleetdrill ", "go ", "curl ", "make "} {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
		return false
	}
	return false
}

// docCommand is one command of a block: its text as a shell reads it,
// whether it runs in the background (a trailing &), the exit status the
// doc says it has, and, in a console block, the output lines shown.
type docCommand struct {
	line       int // in the markdown file
	text       string
	background bool
	exit       int
	want       []string
}

// exitComment is a command's trailing comment that states its exit
// status: "# exit 1", "# ... (exit 2)".
var exitComment = regexp.MustCompile(`\bexit (\d)\)?\s*$`)

// commands splits a block into its commands. A command goes on over lines
// ending in a backslash and over newlines inside quotes; a line that is
// only a comment is skipped. In a console block a command starts with "$ "
// and the lines up to the next one are its output; a last output line
// "exit N" is its exit status, not output.
func (b docBlock) commands() ([]docCommand, error) {
	var out []docCommand
	console := b.lang == "console"
	for i := 0; i < len(b.lines); i++ {
		line := b.lines[i]
		trim := strings.TrimSpace(line)
		if console {
			rest, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				if len(out) == 0 && trim != "" {
					return nil, fmt.Errorf("%s:%d: a console block starts with a \"$ \" command", b.file, b.line+1+i)
				}
				if len(out) > 0 {
					out[len(out)-1].want = append(out[len(out)-1].want, line)
				}
				continue
			}
			line = rest
		} else if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		start := i
		text := line
		for {
			st := scanShell(text)
			if st.quote == 0 && !st.continued {
				break
			}
			if i+1 >= len(b.lines) {
				return nil, fmt.Errorf("%s:%d: the command goes on past the block's end (an open quote or a trailing \\)", b.file, b.line+1+start)
			}
			i++
			text += "\n" + b.lines[i]
		}
		c := docCommand{line: b.line + 1 + start, text: text}
		if st := scanShell(text); st.comment >= 0 {
			if m := exitComment.FindStringSubmatch(text[st.comment:]); m != nil {
				c.exit, _ = strconv.Atoi(m[1])
			}
			c.text = strings.TrimSpace(text[:st.comment])
		}
		if bg, ok := strings.CutSuffix(strings.TrimSpace(c.text), "&"); ok && !strings.HasSuffix(bg, "&") {
			c.text, c.background = strings.TrimSpace(bg), true
		}
		out = append(out, c)
	}
	for i := range out {
		w := trimBlank(out[i].want)
		if n := len(w); n > 0 {
			if code, ok := strings.CutPrefix(strings.TrimSpace(w[n-1]), "exit "); ok {
				if c, err := strconv.Atoi(code); err == nil {
					out[i].exit, w = c, trimBlank(w[:n-1])
				}
			}
		}
		out[i].want = w
	}
	return out, nil
}

// trimBlank drops the blank lines at the end of lines.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// shellState is what scanShell found in a command's text: the quote left
// open (0: none), whether the last line ends in a backslash outside
// quotes, and where its comment starts (-1: none).
type shellState struct {
	quote     byte
	continued bool
	comment   int
}

// scanShell reads text as a POSIX shell tokenizes quotes, escapes and
// comments, enough to tell where a command ends.
func scanShell(text string) shellState {
	st := shellState{comment: -1}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch st.quote {
		case '\'':
			if c == '\'' {
				st.quote = 0
			}
			continue
		case '"':
			switch c {
			case '\\':
				i++
			case '"':
				st.quote = 0
			}
			continue
		}
		switch c {
		case '\\':
			if i == len(text)-1 {
				st.continued = true
			}
			i++
		case '\'', '"':
			st.quote = c
		case '#':
			if i == 0 || text[i-1] == ' ' || text[i-1] == '\t' {
				// A comment runs to the line's end; a continued command has
				// no comment but on its last line.
				if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
					i += nl
					continue
				}
				st.comment = i
				return st
			}
		}
	}
	return st
}

// wallClock is output that differs run to run: how long the runs took,
// on how many workers.
var wallClock = regexp.MustCompile(`\b(\d+ runs?) in \S+ on \d+ workers?\b`)

func normalizeOutput(s string) string {
	return strings.Join(strings.Fields(wallClock.ReplaceAllString(s, "$1 in T on N workers")), " ")
}

// outputHolds checks that got holds the doc's lines in their order (other
// lines may come between them). A line "..." or "…" stands for lines left
// out; inside a line, "..." or a trailing "…" stands for text left out.
// Space is compared loosely (columns may shift); wall-clock times are not
// compared. It returns the first line not found, or "".
func outputHolds(got string, want []string) string {
	lines := strings.Split(got, "\n")
	for i := range lines {
		lines[i] = normalizeOutput(lines[i])
	}
	at := 0
	for _, w := range want {
		nw := normalizeOutput(w)
		if nw == "" || nw == "..." || nw == "…" {
			continue
		}
		re := lineMatcher(nw)
		found := false
		for ; at < len(lines); at++ {
			if re.MatchString(lines[at]) {
				found = true
				at++
				break
			}
		}
		if !found {
			return w
		}
	}
	return ""
}

// lineMatcher matches a line the doc shows, normalized: the whole line,
// with "..." or "…" in it standing for any text.
func lineMatcher(line string) *regexp.Regexp {
	parts := strings.Split(strings.ReplaceAll(line, "…", "..."), "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(strings.TrimSpace(p))
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// docFiles are the markdown files whose commands run.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

// TestDocsBlocksFollowTheConvention: every marker names a reason, no
// marker sits on a block that never runs, every block of commands says
// whether it is sh or console, and every command parses. It reads only
// the docs, so it runs under -short too.
func TestDocsBlocksFollowTheConvention(t *testing.T) {
	root := filepath.Join("..", "..")
	var problems []string
	runnable := 0
	for _, f := range docFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		blocks, p := readDocBlocks(f, string(text))
		problems = append(problems, p...)
		for _, b := range blocks {
			if !b.runs() {
				continue
			}
			cmds, err := b.commands()
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if b.skip == "" {
				runnable += len(cmds)
			}
		}
	}
	require.Empty(t, problems, "the docs' command blocks (docs/architecture.md, \"Docs that run\")")
	require.Greater(t, runnable, 40, "the docs' runnable commands: a parser that finds none passes nothing")
}

// TestDocsCommands runs the docs' commands. Each markdown file gets a
// working directory of its own, shared by its blocks in order (a block
// may use the file an earlier one wrote), that links every entry of the
// repository root (and ../shared, as the repository sees it), so a
// command that reads internal/... or ../shared/... finds it and what a
// command writes stays out of the tree.
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built binary on every doc's commands: without -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := buildFleetdrill(t)
	for _, f := range docFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		blocks, problems := readDocBlocks(f, string(text))
		require.Empty(t, problems)
		t.Run(f, func(t *testing.T) {
			dir := docsWorkDir(t, root)
			for _, b := range blocks {
				if b.writes != "" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, b.writes), []byte(strings.Join(b.lines, "\n")+"\n"), 0o644))
					continue
				}
				if !b.runs() {
					continue
				}
				t.Run(strconv.Itoa(b.line), func(t *testing.T) {
					if b.skip != "" {
						t.Skipf("%s: docs-test: %s", b.name(), b.skip)
					}
					cmds, err := b.commands()
					require.NoError(t, err)
					runDocBlock(t, bin, dir, b, cmds)
				})
			}
		})
	}
}

// buildFleetdrill builds the binary the docs call. Never with the race
// detector, even when the test has it: it would make the planner's and
// the calibration's commands several times slower, and nothing in a
// command's run is this test's concurrency.
func buildFleetdrill(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "fleetdrill"), ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

func docsWorkDir(t *testing.T, root string) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "repo")
	require.NoError(t, os.Mkdir(dir, 0o755))
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())))
	}
	if shared, err := filepath.EvalSymlinks(filepath.Join(root, "..", "shared")); err == nil {
		require.NoError(t, os.Symlink(shared, filepath.Join(base, "shared")))
	}
	return dir
}

// docCommandLimit bounds one command, so a command that hangs fails its
// block with its text rather than stalling the suite; no doc command
// comes near it.
const docCommandLimit = 3 * time.Minute

// runDocBlock runs a block's commands in order with bash, the binary
// first on PATH; a background command runs until the block's end.
func runDocBlock(t *testing.T, bin, dir string, b docBlock, cmds []docCommand) {
	skipUnlessRunnable(t, dir, b, cmds)
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	type started struct {
		cmd *exec.Cmd
		out string
	}
	var background []started
	defer func() {
		for _, s := range background {
			// The command's process group: bash and what it started.
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
	}()
	// What a failure says: the command, its output, and the output of the
	// servers the block started (a gateway that refused its keys file).
	failure := func(where, got string) string {
		msg := where + "\n" + tail(got, 60)
		for _, s := range background {
			if b, err := os.ReadFile(s.out); err == nil {
				msg += fmt.Sprintf("\n--- background %s:\n%s", strings.Join(s.cmd.Args[2:], " "), tail(string(b), 20))
			}
		}
		return msg
	}
	for _, c := range cmds {
		out, err := os.CreateTemp(t.TempDir(), "out")
		require.NoError(t, err)
		where := fmt.Sprintf("%s:%d: %s", b.file, c.line, c.text)
		cmd := exec.Command("bash", "-c", c.text)
		cmd.Dir, cmd.Env = dir, env
		// One file for both streams: the doc shows them interleaved as a
		// terminal does.
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start(), where)
		if c.background {
			background = append(background, started{cmd, out.Name()})
			continue
		}
		timer := time.AfterFunc(docCommandLimit, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		err = cmd.Wait()
		timer.Stop()
		got, rerr := os.ReadFile(out.Name())
		require.NoError(t, rerr)
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "%s: %v", where, err)
			code = ee.ExitCode()
		}
		if code != c.exit {
			t.Fatalf("exit %d, the doc says %d (a trailing \"# exit N\", or a console block's last output line \"exit N\", says another; "+
				"-1: killed after %s): %s", code, c.exit, docCommandLimit, failure(where, string(got)))
		}
		if missing := outputHolds(string(got), c.want); missing != "" {
			t.Fatalf("the doc shows %q, which the output lacks (in its order); rerun the command and update the doc: %s", missing, failure(where, string(got)))
		}
	}
}

// localAddr is a loopback address a block's server listens on or its
// client calls.
var localAddr = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)

// skipUnlessRunnable skips a block this machine cannot run as written:
// one that reads ../shared where the checkout has none, one that calls
// curl, openssl or promtool where they are not installed, one whose loopback ports
// something else holds (its curl would reach that instead).
func skipUnlessRunnable(t *testing.T, dir string, b docBlock, cmds []docCommand) {
	t.Helper()
	var text strings.Builder
	for _, c := range cmds {
		text.WriteString(c.text + "\n")
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "shared")); err != nil && strings.Contains(text.String(), "../shared/") {
		t.Skipf("%s: reads ../shared, which this checkout lacks", b.name())
	}
	for _, tool := range []string{"curl", "openssl", "promtool"} {
		if regexp.MustCompile(`(^|[\s|(])` + tool + ` `).MatchString(text.String()) {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s: needs %s, which is not on PATH", b.name(), tool)
			}
		}
	}
	for _, m := range localAddr.FindAllStringSubmatch(text.String(), -1) {
		ln, err := net.Listen("tcp", m[0])
		if err != nil {
			t.Skipf("%s: needs %s, which something on this machine holds: %v", b.name(), m[0], err)
		}
		_ = ln.Close()
	}
}

// tail is the last n lines of s, for a failure's message.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
