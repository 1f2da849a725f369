package tui

import (
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/fleetdrill/fleetdrill/twin"
)

// screen is what the console shows.
type screen int

const (
	screenConsole screen = iota // the live drill
	screenSummary               // after q, or when the run ends
)

// pane is the selectable pane the arrows move in.
type pane int

const (
	paneFleet  pane = iota // pools
	paneRoutes             // per model and tenant
)

// speeds are the steps of + and -: simulated seconds per wall second.
var speeds = []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 3000}

// poolRef locates a pool of the current snapshot.
type poolRef struct {
	region, jurisdiction string
	pool                 *twin.PoolState
}

// routeRef locates a route of the current snapshot.
type routeRef struct {
	model string
	queue int
	route *twin.RouteState
}

// classHist is a class's latency history, for the sparklines.
type classHist struct{ ttft, e2e *series }

// Model is the console's Bubble Tea model. It reads frames from the
// driver and sends it commands; it never calls the engine. The message
// routing follows glow's: global keys first, then the console's own
// messages (frames), then the keys of the screen shown.
type Model struct {
	send   func(command)
	frames <-chan Frame
	// base is the scenario the drill started from, for the summary's
	// replay command.
	base Base

	keys keyMap
	st   *styles
	help help.Model

	width, height int

	frame Frame // the latest; frame.Snap is the drill's state
	have  bool  // a frame has arrived
	final *Result

	hist map[string]*classHist

	// The selection, by name so that it survives new snapshots.
	selPool             string
	selModel, selTenant string
	focus               pane

	screen   screen
	showHelp bool
	// helpPaused is set when opening the help paused the drill: closing it
	// resumes the drill then, and only then.
	helpPaused  bool
	confirmQuit bool // q was pressed on a running drill: y finishes it
	finishing   bool // the driver is finishing the drill
	notice      *Notice
	scroll      int // summary timeline scroll

	// The command line (palette.go), open after ':'.
	palette     textinput.Model
	paletteOpen bool

	// Rebuilt on each frame.
	pools  []poolRef
	routes []routeRef

	hints []hint // the help bar's keys, rendered (footer.go)
}

// frameMsg carries a Frame from the driver; framesClosedMsg says the
// driver has stopped.
type (
	frameMsg        Frame
	framesClosedMsg struct{}
)

// New returns a console that reads frames and sends commands with send.
func New(frames <-chan Frame, send func(command)) *Model {
	st := newStyles()
	h := help.New()
	// The help bubble's own greys are true colours picked for a dark
	// background; the console's ANSI ones follow the terminal's theme.
	h.Styles = help.Styles{
		Ellipsis: st.dim.style, ShortKey: st.key.style, ShortDesc: st.keyDesc.style, ShortSeparator: st.dim.style,
		FullKey: st.key.style, FullDesc: st.keyDesc.style, FullSeparator: st.dim.style,
	}
	m := &Model{
		send:    send,
		frames:  frames,
		keys:    newKeyMap(),
		st:      st,
		help:    h,
		width:   80,
		height:  24,
		hist:    map[string]*classHist{},
		palette: newPalette(st),
	}
	m.hints = m.newHints()
	return m
}

// listen waits for the next frame: the model re-arms it after each frame,
// as in Bubble Tea's realtime example.
func (m *Model) listen() tea.Cmd {
	ch := m.frames
	return func() tea.Msg {
		f, ok := <-ch
		if !ok {
			return framesClosedMsg{}
		}
		return frameMsg(f)
	}
}

// Init starts listening for frames.
func (m *Model) Init() tea.Cmd { return m.listen() }

// Update handles a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case frameMsg:
		m.apply(Frame(msg))
		if msg.Final != nil {
			return m, nil // the last frame: nothing more will come
		}
		return m, m.listen()
	case framesClosedMsg:
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	case tea.PasteMsg:
		// A fault line pasted into the open palette (bracketed paste
		// arrives as one message, not as keys).
		if m.paletteOpen {
			var cmd tea.Cmd
			m.palette, cmd = m.palette.Update(msg)
			return m, cmd
		}
	}
	return m, nil
}

// apply takes a new frame in.
func (m *Model) apply(f Frame) {
	m.frame, m.have = f, true
	for i := range f.Notices {
		m.notice = &f.Notices[i]
	}
	s := &m.frame.Snap
	for _, c := range s.Classes {
		h := m.hist[c.Name]
		if h == nil {
			h = &classHist{ttft: newSeries(), e2e: newSeries()}
			m.hist[c.Name] = h
		}
		// TTFT counts the requests still waiting for their first token at
		// their current age: an outage shows while it holds them, not
		// once they drain.
		ttft, e2e := c.TTFTP99Now().Seconds(), c.E2EP99.Seconds()
		if c.Completed == 0 {
			e2e = math.NaN()
			if c.Waiting == 0 {
				ttft = math.NaN()
			}
		}
		h.ttft.add(s.Now, ttft)
		h.e2e.add(s.Now, e2e)
	}
	m.pools = m.pools[:0]
	for ri := range s.Regions {
		r := &s.Regions[ri]
		for pi := range r.Pools {
			m.pools = append(m.pools, poolRef{region: r.Name, jurisdiction: r.Jurisdiction, pool: &r.Pools[pi]})
		}
	}
	m.routes = m.routes[:0]
	for mi := range s.Models {
		md := &s.Models[mi]
		for ri := range md.Routes {
			m.routes = append(m.routes, routeRef{model: md.Name, queue: md.Queue, route: &md.Routes[ri]})
		}
	}
	if m.poolIndex() < 0 && len(m.pools) > 0 {
		m.selPool = m.pools[0].pool.Name
	}
	if m.routeIndex() < 0 && len(m.routes) > 0 {
		m.selModel, m.selTenant = m.routes[0].model, m.routes[0].route.Tenant
	}
	if f.Final != nil {
		m.final = f.Final
		m.screen = screenSummary
		m.showHelp, m.helpPaused, m.confirmQuit = false, false, false
		if m.paletteOpen {
			m.closePalette()
		}
	}
}

func (m *Model) poolIndex() int {
	return slices.IndexFunc(m.pools, func(p poolRef) bool { return p.pool.Name == m.selPool })
}

func (m *Model) routeIndex() int {
	return slices.IndexFunc(m.routes, func(r routeRef) bool {
		return r.model == m.selModel && r.route.Tenant == m.selTenant
	})
}

// selection is what the inject keys act on.
func (m *Model) selection() selection {
	var sel selection
	if i := m.poolIndex(); i >= 0 {
		p := m.pools[i]
		sel.Pool, sel.Region, sel.Provider = p.pool.Name, p.region, p.pool.Provider
	}
	if i := m.routeIndex(); i >= 0 {
		sel.Model, sel.Tenant = m.routes[i].model, m.routes[i].route.Tenant
	}
	return sel
}

// key handles a key press.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	km := m.keys
	if key.Matches(k, km.Abort) {
		m.finish()
		return tea.Quit
	}
	if m.paletteOpen {
		return m.paletteKey(k)
	}
	if m.confirmQuit {
		m.confirmQuit = false
		if strings.EqualFold(k.Text, "y") {
			m.finish()
			m.screen = screenSummary
		}
		return nil
	}
	if m.showHelp {
		m.closeHelp()
		if !key.Matches(k, km.Quit) {
			return nil
		}
	}
	if m.screen == screenSummary {
		switch {
		case key.Matches(k, km.Quit), k.String() == "enter":
			m.finish()
			return tea.Quit
		case key.Matches(k, km.Back):
			m.screen = screenConsole
		case key.Matches(k, km.Up):
			m.scroll = max(m.scroll-1, 0)
		case key.Matches(k, km.Down):
			m.scroll++
		}
		return nil
	}
	m.notice = nil
	switch {
	case key.Matches(k, km.Help):
		m.openHelp()
	case key.Matches(k, km.Quit):
		if m.final == nil && !m.finishing {
			m.confirmQuit = true // the footer asks; y finishes
			return nil
		}
		m.screen = screenSummary
	case key.Matches(k, km.Up):
		m.move(-1)
	case key.Matches(k, km.Down):
		m.move(1)
	case key.Matches(k, km.Focus):
		m.focus = 1 - m.focus
	case m.final != nil:
		m.notice = &Notice{Text: "the drill has ended: q for the summary", Err: true}
	case key.Matches(k, km.Pause):
		if m.frame.Paused {
			m.frame.Paused = false
			m.send(command{kind: cmdResume})
		} else {
			m.frame.Paused = true
			m.send(command{kind: cmdPause})
		}
	case key.Matches(k, km.Step):
		m.frame.Paused = true
		m.send(command{kind: cmdStep})
	case key.Matches(k, km.StepEvent):
		m.frame.Paused = true
		m.send(command{kind: cmdStepEvent})
	case key.Matches(k, km.Faster):
		m.setSpeed(nextSpeed(m.frame.Speed, 1))
	case key.Matches(k, km.Slower):
		m.setSpeed(nextSpeed(m.frame.Speed, -1))
	case key.Matches(k, km.Palette):
		return m.openPalette()
	case key.Matches(k, km.EndFault):
		label := faultToEnd(m.frame.Snap.Faults, m.selection(), m.focus == paneRoutes)
		if label == "" {
			m.notice = &Notice{Text: "no active fault to end", Err: true}
			return nil
		}
		m.send(command{kind: cmdEndFault, label: label})
	default:
		for _, ik := range km.Inject {
			if key.Matches(k, ik.Binding) {
				line, why := faultLine(ik.kind, m.selection())
				if line == "" {
					m.notice = &Notice{Text: string(ik.kind) + ": " + why, Err: true}
					return nil
				}
				m.send(command{kind: cmdInject, line: line})
				return nil
			}
		}
	}
	return nil
}

// openHelp shows the help and pauses a running drill while it is open (a
// live replay cannot pause: there the help just shows).
func (m *Model) openHelp() {
	m.showHelp = true
	if m.have && m.final == nil && !m.finishing && !m.frame.Live && !m.frame.Paused {
		m.helpPaused = true
		m.frame.Paused = true
		m.send(command{kind: cmdPause})
	}
}

// closeHelp hides the help and resumes the drill if, and only if, opening
// the help paused it: a drill the operator paused stays paused.
func (m *Model) closeHelp() {
	m.showHelp = false
	if m.helpPaused {
		m.helpPaused = false
		if m.final == nil && !m.finishing {
			m.frame.Paused = false
			m.send(command{kind: cmdResume})
		}
	}
}

// finish asks the driver, once, to finish the drill.
func (m *Model) finish() {
	if !m.finishing && m.final == nil {
		m.finishing = true
		m.send(command{kind: cmdFinish})
	}
}

func (m *Model) setSpeed(s float64) {
	if s == m.frame.Speed {
		return
	}
	m.frame.Speed = s
	m.send(command{kind: cmdSpeed, speed: s})
}

// nextSpeed is the next step of speeds above (dir > 0) or below cur; cur
// itself at either end.
func nextSpeed(cur float64, dir int) float64 {
	if dir > 0 {
		for _, s := range speeds {
			if s > cur {
				return s
			}
		}
		return cur
	}
	for i := len(speeds) - 1; i >= 0; i-- {
		if speeds[i] < cur {
			return speeds[i]
		}
	}
	return cur
}

// move moves the selection of the focused pane by d.
func (m *Model) move(d int) {
	if m.focus == paneFleet {
		if n := len(m.pools); n > 0 {
			i := (max(m.poolIndex(), 0) + d + n) % n
			m.selPool = m.pools[i].pool.Name
		}
		return
	}
	if n := len(m.routes); n > 0 {
		i := (max(m.routeIndex(), 0) + d + n) % n
		m.selModel, m.selTenant = m.routes[i].model, m.routes[i].route.Tenant
	}
}

// View renders the console.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "fleetdrill tui"
	if m.frame.Snap.Scenario != "" {
		v.WindowTitle += " · " + m.frame.Snap.Scenario
	}
	return v
}
