package transform

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// registryFrame is a registry's framing for the tests: a magic byte and
// the id (8 bytes, or 4), numbered in the order schemas come.
type registryFrame struct {
	idSize int
	calls  []string // topic and schema of each call
}

func (f *registryFrame) frame(topic, sch string, datum []byte) ([]byte, error) {
	f.calls = append(f.calls, topic+" "+sch)
	out := []byte{0}
	id := uint64(len(f.calls) + 40)
	if f.idSize == 4 {
		out = binary.BigEndian.AppendUint32(out, uint32(id))
	} else {
		out = binary.BigEndian.AppendUint64(out, id)
	}
	return append(out, datum...), nil
}

func TestCloudEventAvro(t *testing.T) {
	const url = "http://registry:8080/apis/registry/v2"
	s, v := pgChangeEvent(t, &Struct{Values: []any{"765:33301568", int64(2), int64(1)}})
	dataSchema := `{"type":"record","name":"Data","namespace":"io.debezium.connector.postgresql","fields":[` +
		`{"name":"before","type":["null",{"type":"record","name":"Value","namespace":"p.public.t","fields":[{"name":"id","type":"long"}],"connect.name":"p.public.t.Value"}],"default":null},` +
		`{"name":"after","type":["null","p.public.t.Value"],"default":null}],"connect.name":"io.debezium.connector.postgresql.Data"}`
	// The data: before null (union branch 0), after branch 1, id 7.
	dataDatum := []byte{0, 2, 14}
	for _, tc := range []struct {
		name   string
		conv   schema.Converter
		idSize int
		topics []string
		check  func(t *testing.T, out []byte, f *registryFrame)
	}{{
		name: "JSON event, Avro data", conv: "cloudevents:avro", topics: []string{"t"},
		check: func(t *testing.T, out []byte, f *registryFrame) {
			framed, _ := f.frame("", "", dataDatum)
			framed[8] = 41
			want := `{"id":"name:p;lsn:33301568;txId:765;sequence:[null,\"33301568\"]","source":"/debezium/postgresql/p","specversion":"1.0",` +
				`"type":"io.debezium.connector.postgresql.DataChangeEvent","time":"2026-01-02T03:04:05.123Z","datacontenttype":"application/avro",` +
				`"dataschema":"` + url + `/schemas/ids/0",` +
				`"iodebeziumop":"c","iodebeziumconnector":"postgresql","iodebeziumname":"p","iodebeziumtsms":"1767323045123","iodebeziumsnapshot":"false",` +
				`"iodebeziumtxId":"765","iodebeziumlsn":"33301568","iodebeziumxmin":null,"iodebeziumsequence":"[null,\"33301568\"]",` +
				`"iodebeziumtxid":"765:33301568","iodebeziumtxtotalorder":"2","iodebeziumtxdatacollectionorder":"1",` +
				`"data":"` + base64.StdEncoding.EncodeToString(framed) + `"}`
			if string(out) != want {
				t.Errorf("got\n%s\nwant\n%s", out, want)
			}
		},
	}, {
		name: "JSON event, 4-byte ids", conv: "cloudevents:avro", idSize: 4, topics: []string{"t"},
		check: func(t *testing.T, out []byte, f *registryFrame) {
			if !strings.Contains(string(out), `"dataschema":"`+url+`/schemas/ids/41"`) {
				t.Errorf("dataschema: %s", out)
			}
		},
	}, {
		name: "Avro event", conv: "cloudevents:avro:avro", topics: []string{"t-data", "t"},
		check: func(t *testing.T, out []byte, f *registryFrame) {
			wantSchema := `{"type":"record","name":"Envelope","namespace":"p.null.CloudEvents","fields":[` +
				`{"name":"id","type":"string"},{"name":"source","type":"string"},{"name":"specversion","type":"string"},{"name":"type","type":"string"},` +
				`{"name":"time","type":"string"},{"name":"datacontenttype","type":"string"},{"name":"dataschema","type":"string"},{"name":"iodebeziumop","type":"string"},` +
				`{"name":"iodebeziumconnector","type":"string"},{"name":"iodebeziumname","type":"string"},{"name":"iodebeziumtsms","type":"string"},` +
				`{"name":"iodebeziumsnapshot","type":["null","string"],"default":null},{"name":"iodebeziumtxId","type":["null","string"],"default":null},` +
				`{"name":"iodebeziumlsn","type":["null","string"],"default":null},{"name":"iodebeziumxmin","type":["null","string"],"default":null},` +
				`{"name":"iodebeziumsequence","type":["null","string"],"default":null},{"name":"iodebeziumtxid","type":["null","string"],"default":null},` +
				`{"name":"iodebeziumtxtotalorder","type":["null","string"],"default":null},{"name":"iodebeziumtxdatacollectionorder","type":["null","string"],"default":null},` +
				`{"name":"data","type":"bytes"}],"connect.name":"p.null.CloudEvents.Envelope"}`
			if got := f.calls[1][len("t "):]; got != wantSchema {
				t.Errorf("event schema\n%s\nwant\n%s", got, wantSchema)
			}
			// Framed for the topic: the magic byte, the id, the datum,
			// which ends in the framed data as bytes.
			if out[0] != 0 || binary.BigEndian.Uint64(out[1:9]) != 42 {
				t.Errorf("event framing: % x", out[:9])
			}
			framed := append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 41}, dataDatum...)
			if !strings.HasSuffix(string(out), string(append([]byte{byte(2 * len(framed))}, framed...))) {
				t.Errorf("the event does not end in the framed data: % x", out)
			}
			if !strings.Contains(string(out), url+"/schemas/ids/0") {
				t.Errorf("no dataschema in % q", out)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Record{Topic: "t", ValueSchema: s, Value: v}
			finish, err := r.cloudEventAvro(Converters{Value: tc.conv})
			if err != nil {
				t.Fatal(err)
			}
			f := &registryFrame{idSize: tc.idSize}
			out, err := finish(url, f.frame)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.calls) != len(tc.topics) {
				t.Fatalf("framed %d times, want %d: %q", len(f.calls), len(tc.topics), f.calls)
			}
			for i, topic := range tc.topics {
				if !strings.HasPrefix(f.calls[i], topic+" {") {
					t.Errorf("frame %d under %q, want %q", i, f.calls[i][:strings.IndexByte(f.calls[i], ' ')], topic)
				}
			}
			if got := f.calls[0][len(tc.topics[0])+1:]; got != dataSchema {
				t.Errorf("data schema\n%s\nwant\n%s", got, dataSchema)
			}
			f.calls = f.calls[:len(tc.topics)]
			tc.check(t, out, f)
		})
	}
}

func TestCloudEventAvroOfAnotherValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Record
		null bool
	}{
		{name: "null", r: Record{Topic: "t", ValueSchema: &Schema{Type: StructT, Name: "p.public.t.Envelope", Optional: true}}, null: true},
		{name: "not a change event", r: Record{Topic: "t", ValueSchema: &Schema{Type: String}, Value: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			finish, err := tc.r.cloudEventAvro(Converters{Value: "cloudevents:avro:avro"})
			if tc.null {
				if err != nil || finish != nil {
					t.Fatalf("a null value: %v, %v", finish != nil, err)
				}
				return
			}
			var de *DataError
			if !errors.As(err, &de) {
				t.Fatalf("err %v, want a DataError", err)
			}
		})
	}
}
