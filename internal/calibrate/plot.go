package calibrate

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var (
	measuredColor  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	predictedColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// Plot draws the fidelity of a run to path, PNG or SVG by its extension:
// measured against predicted CDFs of TTFT, TPOT and end-to-end latency, and
// the running and waiting time series.
func Plot(path string, f *Fidelity) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("calibrate: plot %s: want a .png or .svg file", path)
	}
	plots := [][]*plot.Plot{{nil, nil}, {nil, nil}}
	var err error
	for i, m := range []string{"ttft", "tpot", "e2e"} {
		if plots[i/2][i%2], err = cdfPlot(f, m); err != nil {
			return err
		}
	}
	if plots[1][1], err = seriesPlot(f); err != nil {
		return err
	}
	w, h := 24*vg.Centimeter, 18*vg.Centimeter
	var c vg.CanvasWriterTo
	switch ext {
	case ".png":
		img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
		c = vgimg.PngCanvas{Canvas: img}
		drawTiles(plots, draw.New(img))
	default:
		svg := vgsvg.New(w, h)
		c = svg
		drawTiles(plots, draw.New(svg))
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("calibrate: plot: %w", err)
	}
	if _, err := c.(io.WriterTo).WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("calibrate: plot: %w", err)
	}
	return out.Close()
}

func drawTiles(plots [][]*plot.Plot, dc draw.Canvas) {
	// A white background: PNGs are otherwise transparent.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	t := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align(plots, t, dc)
	for j := range plots {
		for i := range plots[j] {
			plots[j][i].Draw(canvases[j][i])
		}
	}
}

// cdfPlot draws the empirical CDFs of a metric, measured and predicted.
func cdfPlot(f *Fidelity, metric string) (*plot.Plot, error) {
	meas, pred := f.Samples(metric)
	p := plot.New()
	q := f.Metrics[metric]
	p.Title.Text = fmt.Sprintf("%s CDF (p50 error %+.1f%%, p95 %+.1f%%)", strings.ToUpper(metric),
		100*orZero(q.RelErr.P50), 100*orZero(q.RelErr.P95))
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "fraction of requests"
	for _, s := range []struct {
		name string
		xs   []float64
		c    color.Color
	}{{"measured", meas, measuredColor}, {"twin", pred, predictedColor}} {
		l, err := plotter.NewLine(cdf(s.xs))
		if err != nil {
			return nil, fmt.Errorf("calibrate: plot %s: %w", metric, err)
		}
		l.Color = s.c
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	return p, nil
}

// cdf is the empirical CDF of xs as a step line.
func cdf(xs []float64) plotter.XYs {
	s := slices.Clone(xs)
	slices.Sort(s) // a plot of every sample, not a statistic: all points are drawn
	pts := make(plotter.XYs, 0, 2*len(s))
	for i, x := range s {
		pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(len(s))}, plotter.XY{X: x, Y: float64(i+1) / float64(len(s))})
	}
	if len(pts) == 0 {
		pts = append(pts, plotter.XY{})
	}
	return pts
}

// seriesPlot draws running and waiting over time, measured and predicted.
func seriesPlot(f *Fidelity) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "running and waiting requests"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests"
	lines := []struct {
		name string
		get  func(Point) int
		c    color.Color
		dash bool
	}{
		{"running (measured)", func(x Point) int { return x.RunningMeasured }, measuredColor, false},
		{"running (twin)", func(x Point) int { return x.RunningPredicted }, predictedColor, false},
		{"waiting (measured)", func(x Point) int { return x.WaitingMeasured }, measuredColor, true},
		{"waiting (twin)", func(x Point) int { return x.WaitingPredicted }, predictedColor, true},
	}
	for _, s := range lines {
		pts := make(plotter.XYs, len(f.Series))
		for i, x := range f.Series {
			pts[i] = plotter.XY{X: x.T, Y: float64(s.get(x))}
		}
		if len(pts) == 0 {
			pts = append(pts, plotter.XY{})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("calibrate: plot series: %w", err)
		}
		l.Color = s.c
		l.Width = vg.Points(1.2)
		if s.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p, nil
}

func orZero(x *float64) float64 {
	if x == nil {
		return 0
	}
	return *x
}
