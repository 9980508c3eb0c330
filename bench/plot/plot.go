// Package plot draws agentbox bench's figures: how the step's cost grows
// with the screen's size and with environments stepping at once.
package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/codegirl-games/agentbox/bench"
)

// Run is one backend's report in a plot.
type Run struct {
	Backend string
	Report  *bench.Report
}

// Plot draws how the step's cost grows, as a PNG of two panels: p50 and
// p95 against the screen's size (the step at each --screens size,
// unchanged and full frame) and against the number of environments
// stepping at once (--concurrency). A panel with nothing measured says
// so.
func Plot(w io.Writer, runs []Run) error {
	const (
		width, height = 1280, 600
		panelW        = width / 2
	)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)

	var sizes, scale []plotSeries
	for i, r := range runs {
		c := plotColors[i%len(plotColors)]
		var un, full plotSeries
		un = plotSeries{Label: r.Backend + ", screen unchanged", Color: c}
		full = plotSeries{Label: r.Backend + ", full frame", Color: c, Dashed: true}
		for _, s := range r.Report.Steps {
			mp := float64(s.Screen.Width*s.Screen.Height) / 1e6
			if s.Unchanged.N > 0 {
				un.Points = append(un.Points, plotPoint{mp, s.Unchanged.P50, s.Unchanged.P95, fmt.Sprintf("%dx%d", s.Screen.Width, s.Screen.Height)})
			}
			if s.Full.N > 0 {
				full.Points = append(full.Points, plotPoint{mp, s.Full.P50, s.Full.P95, fmt.Sprintf("%dx%d", s.Screen.Width, s.Screen.Height)})
			}
		}
		sizes = append(sizes, un, full)
		sc := plotSeries{Label: r.Backend, Color: c}
		for _, p := range r.Report.Scale {
			sc.Points = append(sc.Points, plotPoint{float64(p.Envs), p.Step.P50, p.Step.P95, ""})
		}
		scale = append(scale, sc)
	}
	drawPanel(img, image.Rect(0, 0, panelW, height), "step against the screen's size (p50 line, p95 bar)", "screen size (log scale of its pixels)", sizes)
	drawPanel(img, image.Rect(panelW, 0, width, height), "step against environments stepping at once (640x480)", "environments at once (log scale)", scale)
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

type plotPoint struct {
	X, P50, P95 float64
	Tick        string // the x axis's label at X (default: X)
}

type plotSeries struct {
	Label  string
	Color  color.RGBA
	Dashed bool
	Points []plotPoint
}

var plotColors = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0x2c, 0xa0, 0x2c, 0xff}, // green
	{0x94, 0x67, 0xbd, 0xff}, // purple
}

var (
	ink   = color.RGBA{0x22, 0x22, 0x22, 0xff}
	grid  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	muted = color.RGBA{0x77, 0x77, 0x77, 0xff}
)

// drawPanel draws one chart of series into r: y in milliseconds from 0,
// x on a log2 scale.
func drawPanel(img *image.RGBA, r image.Rectangle, title, xLabel string, series []plotSeries) {
	left, right, top, bottom := r.Min.X+70, r.Max.X-40, r.Min.Y+60, r.Max.Y-140
	text(img, r.Min.X+20, r.Min.Y+20, title, ink)

	var xs []float64
	ticks := map[float64]string{}
	yMax := 0.0
	for _, s := range series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
			ticks[p.X] = p.Tick
			if p.Tick == "" {
				ticks[p.X] = strconv.FormatFloat(p.X, 'g', 3, 64)
			}
			yMax = math.Max(yMax, math.Max(p.P50, p.P95))
		}
	}
	if len(xs) == 0 {
		text(img, left, (top+bottom)/2, "nothing measured (the bench skipped it)", muted)
		return
	}
	xMin, xMax := xs[0], xs[0]
	for _, x := range xs {
		xMin, xMax = math.Min(xMin, x), math.Max(xMax, x)
	}
	fx := math.Log2
	if xMin == xMax {
		xMin, xMax = xMin/2, xMax*2
	}
	yTop := niceCeil(yMax)
	px := func(x float64) int {
		return left + int(math.Round((fx(x)-fx(xMin))/(fx(xMax)-fx(xMin))*float64(right-left)))
	}
	py := func(y float64) int { return bottom - int(math.Round(y/yTop*float64(bottom-top))) }

	// The grid, the axes and their ticks.
	for i := 0; i <= 5; i++ {
		v := yTop * float64(i) / 5
		y := py(v)
		line(img, left, y, right, y, grid, 1, false)
		lbl := strconv.FormatFloat(v, 'g', 4, 64)
		text(img, left-8-7*len(lbl), y+4, lbl, ink)
	}
	for x, lbl := range ticks {
		text(img, px(x)-7*len(lbl)/2, bottom+18, lbl, ink)
		line(img, px(x), bottom, px(x), bottom+4, ink, 1, false)
	}
	line(img, left, top, left, bottom, ink, 1, false)
	line(img, left, bottom, right, bottom, ink, 1, false)
	text(img, (left+right)/2-7*len(xLabel)/2, bottom+38, xLabel, ink)
	text(img, r.Min.X+8, top-14, "ms per step", ink)

	// The series: p50 joined by a line, p95 a bar above each point.
	ly := bottom + 60
	for _, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		pts := append([]plotPoint(nil), s.Points...)
		sortPoints(pts)
		for i, p := range pts {
			x, y := px(p.X), py(p.P50)
			dot(img, x, y, s.Color)
			line(img, x, y, x, py(p.P95), s.Color, 1, false)
			line(img, x-4, py(p.P95), x+4, py(p.P95), s.Color, 1, false)
			if i > 0 {
				q := pts[i-1]
				line(img, px(q.X), py(q.P50), x, y, s.Color, 2, s.Dashed)
			}
		}
		line(img, left, ly-4, left+30, ly-4, s.Color, 2, s.Dashed)
		text(img, left+38, ly, s.Label, ink)
		ly += 18
	}
}

func sortPoints(p []plotPoint) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].X < p[j-1].X; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for dy := -3; dy <= 3; dy++ {
		for dx := -3; dx <= 3; dx++ {
			if dx*dx+dy*dy <= 9 {
				img.SetRGBA(x+dx, y+dy, c)
			}
		}
	}
}

// line draws from (x0, y0) to (x1, y1) w pixels wide (Bresenham), every
// other run of 6 pixels left out when dashed.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, w int, dashed bool) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for n := 0; ; n++ {
		if !dashed || (n/6)%2 == 0 {
			for i := 0; i < w; i++ {
				for j := 0; j < w; j++ {
					img.SetRGBA(x0+i, y0+j, c)
				}
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
