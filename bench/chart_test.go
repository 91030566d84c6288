package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
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
	dec := xml.NewDecoder(&buf)
	var root string
	polylines := 0
	texts := []string{}
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
			if root == "" {
				root = el.Name.Local
			}
			if el.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			texts = append(texts, string(el))
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
