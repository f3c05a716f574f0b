package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/replproxy/replproxy/bench/internal/probe"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// Charts are PNG files next to RESULTS.md, named by what they show; a run
// removes the ones an earlier run left (a quick run draws fewer).
const chartGlob = "chart-*.png"

const chartW, chartH = 16 * vg.Centimeter, 10 * vg.Centimeter

// series is one line of a chart: medians with their range as error bars.
type series struct {
	name string
	xs   []float64
	ys   []sample.Summary
}

// Len, XY and YError make a series a plotter.XYer and a plotter.YErrorer.
func (s series) Len() int                    { return len(s.xs) }
func (s series) XY(i int) (float64, float64) { return s.xs[i], s.ys[i].Median }
func (s series) YError(i int) (float64, float64) {
	return s.ys[i].Median - s.ys[i].Min, s.ys[i].Max - s.ys[i].Median
}

// lineChart draws each series as points joined by lines, with error bars.
func lineChart(path, title, xLabel, yLabel string, ss []series) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xLabel, yLabel
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	var ticks []plot.Tick
	seen := map[float64]bool{}
	top := 0.0
	for i, s := range ss {
		if s.Len() == 0 {
			continue
		}
		for j, x := range s.xs {
			top = max(top, s.ys[j].Max)
			if !seen[x] {
				seen[x] = true
				ticks = append(ticks, plot.Tick{Value: x, Label: fmt.Sprint(x)})
			}
		}
		line, points, err := plotter.NewLinePoints(s)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		bars, err := plotter.NewYErrorBars(s)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		p.Add(line, points, bars)
		p.Legend.Add(s.name, line, points)
	}
	// Integer ticks at the measured x values, and room above the data for
	// the legend.
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0, p.X.Max+1
	p.Y.Max = top * (1.15 + 0.1*float64(len(ss)))
	p.Add(plotter.NewGrid())
	return p.Save(chartW, chartH, path)
}

// barChart draws groups of bars: one bar per series at each label.
func barChart(path, title, yLabel string, labels []string, names []string, values [][]float64) error {
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = title, yLabel
	p.Legend.Top = true
	w := vg.Points(20)
	top := 0.0
	for i, vs := range values {
		for _, v := range vs {
			top = max(top, v)
		}
		bars, err := plotter.NewBarChart(plotter.Values(vs), w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(values)-1)/2)
		p.Add(bars)
		p.Legend.Add(names[i], bars)
	}
	p.NominalX(labels...)
	p.Y.Min, p.Y.Max = 0, top*1.25 // room for the legend
	p.Add(plotter.NewGrid())
	return p.Save(chartW, chartH, path)
}

// drawCharts draws every chart the results have and returns their file
// names by key.
func (r *results) drawCharts() (map[string]string, error) {
	old, _ := filepath.Glob(filepath.Join(r.opts.out, chartGlob))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return nil, err
		}
	}
	charts := map[string]string{}
	// draw saves chart-<stem>.png and records it under key.
	draw := func(key, stem string, f func(path string) error) error {
		name := "chart-" + stem + ".png"
		if err := f(filepath.Join(r.opts.out, name)); err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		charts[key] = name
		return nil
	}
	if e := r.engine; e != nil {
		var labels []string
		vals := [][]float64{nil, nil}
		for _, row := range e.rows {
			labels = append(labels, fmt.Sprintf("%d replicas", row.replicas))
			vals[0] = append(vals[0], row.fanout.Median)
			vals[1] = append(vals[1], row.raw.Median)
		}
		if err := draw("engine", "engine", func(path string) error {
			return barChart(path, "replbuf fan-out vs raw writev (loopback, all replicas' bytes)",
				"MB/s", labels, []string{"engine (Fanout)", "raw writev"}, vals)
		}); err != nil {
			return nil, err
		}
	}
	if s := r.streaming; s != nil {
		for _, size := range s.sizes() {
			primary, relay := s.seriesAt(size)
			if err := draw(fmt.Sprintf("streaming-primary-%d", size), "streaming-primary-"+fileSize(size), func(path string) error {
				return lineChart(path, fmt.Sprintf("Primary CPU per GB of stream, %s values", sizeName(size)),
					"replicas", "CPU s / GB", primary)
			}); err != nil {
				return nil, err
			}
			if err := draw(fmt.Sprintf("streaming-relay-%d", size), "streaming-relay-"+fileSize(size), func(path string) error {
				return lineChart(path, fmt.Sprintf("Relay CPU per replica-GB, %s values", sizeName(size)),
					"replicas", "CPU s / (GB × replicas)", relay)
			}); err != nil {
				return nil, err
			}
		}
		if labels, vals := s.variantBars(r.opts); len(labels) > 1 {
			if err := draw("variants", "streaming-variants", func(path string) error {
				return barChart(path, fmt.Sprintf("Relay CPU per replica-GB by variant, N=%d, %s values", profileN(r.opts), sizeName(r.opts.tlsSize)),
					"CPU s / (GB × replicas)", labels, []string{"relay CPU (median)"}, [][]float64{vals})
			}); err != nil {
				return nil, err
			}
		}
	}
	if x := r.delay; x != nil && len(x.points) > 0 {
		n := x.chartN()
		for _, q := range []struct {
			name string
			get  func(probe.Quantiles) float64
		}{{"p50", func(q probe.Quantiles) float64 { return q.P50 }}, {"p99", func(q probe.Quantiles) float64 { return q.P99 }}} {
			if err := draw("delay-"+q.name, "delay-"+q.name, func(path string) error {
				return lineChart(path, fmt.Sprintf("Delay to the last replica, %s, N=%d", q.name, n),
					"SETs per second", "µs", x.delaySeries(n, q.get))
			}); err != nil {
				return nil, err
			}
		}
	}
	if x := r.paced; x != nil {
		size := x.chartSize()
		for _, n := range x.chartNs() {
			if err := draw(fmt.Sprintf("paced-%d", n), fmt.Sprintf("paced-relay-N%d", n), func(path string) error {
				return lineChart(path, fmt.Sprintf("Relay CPU at a paced rate, %s values, N=%d", sizeName(size), n),
					"SETs per second", "relay CPU, % of a core", x.relaySeries(size, n))
			}); err != nil {
				return nil, err
			}
		}
	}
	if f := r.fullsync; f != nil {
		byTopo := func(get func(syncSummary) sample.Summary) []series {
			var out []series
			for _, t := range []topology{direct, proxied} {
				s := series{name: t.String()}
				for _, pt := range f.points {
					if pt.point.topology == t {
						s.xs, s.ys = append(s.xs, float64(pt.point.replicas)), append(s.ys, get(pt))
					}
				}
				out = append(out, s)
			}
			return out
		}
		if err := draw("fullsync-time", "fullsync-time", func(path string) error {
			return lineChart(path, fmt.Sprintf("Full sync of %d MiB: time until all replicas are in sync", f.dataMB),
				"replicas attaching at once", "seconds", byTopo(func(s syncSummary) sample.Summary { return s.seconds }))
		}); err != nil {
			return nil, err
		}
		if err := draw("fullsync-cpu", "fullsync-cpu", func(path string) error {
			return lineChart(path, fmt.Sprintf("Full sync of %d MiB: primary CPU incl. fork children", f.dataMB),
				"replicas attaching at once", "CPU s", byTopo(func(s syncSummary) sample.Summary { return s.primaryCPU }))
		}); err != nil {
			return nil, err
		}
	}
	return charts, nil
}

// seriesName is a chart legend entry: the topology, and the variant unless
// it is plain.
func seriesName(p streamPoint) string {
	if p.variant == plain.name {
		return p.topology.String()
	}
	return p.topology.String() + ", " + p.variant
}

// seriesAt is one line per topology and variant (TLS aside) over N at one value size:
// primary CPU per GB (all) and relay CPU per replica-GB (not direct).
func (s *streamingResult) seriesAt(size int) (primary, relay []series) {
	pi, ri := map[string]int{}, map[string]int{}
	add := func(ss *[]series, idx map[string]int, name string, x float64, y sample.Summary) {
		i, ok := idx[name]
		if !ok {
			i = len(*ss)
			idx[name] = i
			*ss = append(*ss, series{name: name})
		}
		(*ss)[i].xs, (*ss)[i].ys = append((*ss)[i].xs, x), append((*ss)[i].ys, y)
	}
	for _, pt := range s.points {
		// The TLS row is one N: it has the variants bar chart instead.
		if pt.point.valueSize != size || variantNamed(pt.point.variant).tls {
			continue
		}
		x, name := float64(pt.point.replicas), seriesName(pt.point)
		add(&primary, pi, name, x, pt.primaryCPUGB)
		if pt.point.topology != direct {
			add(&relay, ri, name, x, pt.relayCPUReplicaGB)
		}
		if pt.point.topology == proxied && pt.point.variant == logOn.name && pt.sendFloor.N > 0 {
			// Measured once per N and size: drawn once, from the default row.
			add(&relay, ri, "send floor", x, pt.sendFloor)
		}
	}
	return primary, relay
}

// variantBars are the relays' CPU per replica-GB at the TLS row's N and
// size, one bar per relay and variant measured there.
func (s *streamingResult) variantBars(o *options) (labels []string, vals []float64) {
	n, size := profileN(o), o.tlsSize
	for _, p := range []streamPoint{
		{chained, plain.name, n, size}, {chained, withTLS.name, n, size},
		{proxied, logOn.name, n, size}, {proxied, logFull.name, n, size}, {proxied, logOff.name, n, size}, {proxied, withTLS.name, n, size},
		{proxied, tlsLogOff.name, n, size},
	} {
		if pt, ok := s.find(p); ok {
			labels, vals = append(labels, p.topology.String()+"\n"+p.variant), append(vals, pt.relayCPUReplicaGB.Median)
		}
	}
	return labels, vals
}
