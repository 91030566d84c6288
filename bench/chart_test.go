package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestSVGWellFormed parses the chart as XML and checks it has a line per
// non-empty series, with names escaped.
func TestSVGWellFormed(t *testing.T) {
	var lat []time.Duration
	for i := range 5000 {
		lat = append(lat, time.Duration(i)*3*time.Microsecond)
	}
	poll := []time.Duration{0, 250 * time.Millisecond, 499 * time.Millisecond}
	series := []Series{{"wal", lat}, {"poll <500ms> & more", poll}, {"empty", nil}}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, `latency "at" 2000/s <&>`, series); err != nil {
		t.Fatal(err)
	}
	elems, texts := parseSVG(t, &buf)
	root := elems[0].Name.Local
	polylines := 0
	for _, el := range elems {
		if el.Name.Local == "polyline" {
			polylines++
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	if polylines != 2 {
		t.Errorf("%d polylines, want 2 (the empty series draws none)", polylines)
	}
	all := strings.Join(texts, "|")
	for _, s := range []string{"poll <500ms> & more", `latency "at" 2000/s <&>`, "wal"} {
		if !strings.Contains(all, s) {
			t.Errorf("chart text lacks %q", s)
		}
	}
}

func TestSVGNoData(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSVG(&buf, "nothing", nil); err != nil {
		t.Fatal(err)
	}
	if err := xml.NewDecoder(&buf).Decode(new(struct{})); err != nil {
		t.Fatalf("empty chart: %v", err)
	}
}

// TestRateSVG draws a sweep's chart: well-formed, a p99 and a p50 line per
// series with points, markers at each rate, names escaped, and a higher
// latency drawn higher up.
func TestRateSVG(t *testing.T) {
	series := sweepReport().RateSeries()
	series[1].Name = "floor <bare> & co"
	series = append(series, RateSeries{Name: "empty"})
	var buf bytes.Buffer
	if err := WriteRateSVG(&buf, "latency & rate", series); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	polylines := map[string][]string{} // stroke -> points
	circles := 0
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "polyline":
				polylines[attr["stroke"]] = append(polylines[attr["stroke"]], attr["points"])
			case "circle":
				circles++
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	wal, floor := polylines[chartColors[0]], polylines[chartColors[1]]
	if len(polylines) != 2 || len(wal) != 2 || len(floor) != 2 {
		t.Fatalf("polylines %v; want p99 and p50 for wal and floor, none for the empty series", polylines)
	}
	if n := len(strings.Fields(wal[0])); n != 2 {
		t.Errorf("wal p99 has %d points, want 2 (500/s and 8000/s)", n)
	}
	if circles != 3 {
		t.Errorf("%d markers, want 3", circles)
	}
	// SVG y grows downwards: wal's p99 at 8000/s (40 ms) is above its p99
	// at 500/s (1.2 ms), and right of it.
	var x0, y0, x1, y1 float64
	if _, err := fmt.Sscanf(wal[0], "%g,%g %g,%g", &x0, &y0, &x1, &y1); err != nil {
		t.Fatalf("points %q: %v", wal[0], err)
	}
	if !(x1 > x0 && y1 < y0) {
		t.Errorf("wal p99 from (%g,%g) to (%g,%g): want up and to the right", x0, y0, x1, y1)
	}
	all := strings.Join(texts, "|")
	for _, s := range []string{"latency & rate", "floor <bare> & co", "wal", "offered load"} {
		if !strings.Contains(all, s) {
			t.Errorf("chart text lacks %q", s)
		}
	}
	var none bytes.Buffer
	if err := WriteRateSVG(&none, "nothing", nil); err != nil {
		t.Fatal(err)
	}
	if err := xml.NewDecoder(&none).Decode(new(struct{})); err != nil {
		t.Fatalf("empty chart: %v", err)
	}
}

// A time chart is well-formed XML; a series breaks its line where a
// reading is missing, and each mark is a line.
func TestTimeSVG(t *testing.T) {
	var a, b []TimePoint
	for i := range 100 {
		v := float64(40 + i%7)
		if i >= 30 && i < 35 {
			v = math.NaN() // down for a while
		}
		a = append(a, TimePoint{T: time.Duration(i) * 10 * time.Second, V: v})
		b = append(b, TimePoint{T: time.Duration(i) * 10 * time.Second, V: float64(i)})
	}
	var buf bytes.Buffer
	marks := []Mark{{T: time.Minute, Label: "relay-sigkill <0>"}, {T: 5 * time.Minute, Label: "kafka-kill"}}
	if err := WriteTimeSVG(&buf, "RSS & more", "MiB", []TimeSeries{{"relay 0", a}, {"relay 1", b}}, marks); err != nil {
		t.Fatal(err)
	}
	elems, _ := parseSVG(t, &buf)
	polylines, lines := 0, 0
	for _, el := range elems {
		switch el.Name.Local {
		case "polyline":
			polylines++
		case "line":
			for _, at := range el.Attr {
				if at.Name.Local == "stroke-dasharray" {
					lines++
				}
			}
		}
	}
	if polylines != 3 {
		t.Errorf("%d polylines, want 3 (relay 0 broken once where it was down, relay 1 whole)", polylines)
	}
	if lines != 2 {
		t.Errorf("%d marks drawn, want 2", lines)
	}
	for v, want := range map[float64]float64{0.3: 0.5, 7: 10, 12: 20, 40: 50, 0.07: 0.1} {
		if got := niceStep(v); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceStep(%g) = %g, want %g", v, got, want)
		}
	}
}

// parseSVG parses a chart as XML, failing the test if it is not well
// formed, and returns its elements and its text, in order.
func parseSVG(t *testing.T, buf *bytes.Buffer) ([]xml.StartElement, []string) {
	t.Helper()
	doc := buf.String()
	dec := xml.NewDecoder(buf)
	var elems []xml.StartElement
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			elems = append(elems, el.Copy())
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	if len(elems) == 0 {
		t.Fatalf("no element in the chart:\n%s", doc)
	}
	return elems, texts
}
