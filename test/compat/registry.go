package compat

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The schema registry's part of a case: a case whose key or value
// converter is Apicurio's AvroConverter runs both sides against the
// corpus's registry (the harness sets apicurio.registry.url), and its
// records are compared with each schema id replaced by the schema it
// names (ids are the registry's counters, different for the two sides);
// then the schemas each side registered, subject by subject (without the
// sides' topic prefixes), version by version.

const (
	apicurioAvro = "io.apicurio.registry.utils.converter.AvroConverter"
	// apicurioJSON is Apicurio's JSON converter: the value as
	// JsonConverter writes it without schemas, in {"schemaId":…,"payload":…}
	// with the global id of its Connect schema, registered as KCONNECT.
	apicurioJSON = "io.apicurio.registry.utils.converter.ExtJsonConverter"
)

// registryParts are the parts (key, value) of conf that Apicurio's
// converter writes, itself or as BinaryDataConverter's delegate.
func registryParts(conf map[string]string) []string {
	var parts []string
	for _, p := range []string{"key", "value"} {
		if registryPrefix(conf, p) != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// registryPrefix is where the options of part's Apicurio converter are:
// key.converter. or, for BinaryDataConverter's delegate,
// key.converter.delegate.converter.type.; "" for another converter.
func registryPrefix(conf map[string]string, part string) string {
	switch {
	case conf[part+".converter"] == apicurioAvro, conf[part+".converter"] == apicurioJSON:
		return part + ".converter."
	case conf[part+".converter.delegate.converter.type"] == apicurioAvro:
		return part + ".converter.delegate.converter.type."
	}
	if avro, _ := cloudEventsAvro(conf, part); avro {
		return part + ".converter.avro."
	}
	return ""
}

// UsesRegistry tells whether the case needs the schema registry.
func (c Case) UsesRegistry() bool { return len(registryParts(c.DebeziumConfig())) > 0 }

// framing is how a part's converter places the schema id.
type framing struct {
	headers bool
	idSize  int
	content bool
	json    bool // {"schemaId":…,"payload":…}, the global id
}

func framingOf(conf map[string]string, part string) framing {
	if conf[part+".converter"] == apicurioJSON {
		return framing{json: true}
	}
	opt := func(k string) string {
		return strings.ToLower(strings.TrimSpace(conf[registryPrefix(conf, part)+"apicurio.registry."+k]))
	}
	f := framing{headers: opt("headers.enabled") != "false", idSize: 8, content: opt("use-id") == "contentid"}
	if avro, _ := cloudEventsAvro(conf, part); avro {
		f.headers = false
	}
	if opt("as-confluent") == "true" || opt("id-handler") == "io.apicurio.registry.serde.legacy4byteidhandler" {
		f.idSize = 4
	}
	return f
}

// registryClient reads the corpus registry's API.
type registryClient struct{ api string }

func (rc registryClient) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.api+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, data)
	}
	return data, nil
}

// schemaOf is the content of a global or content id.
func (rc registryClient) schemaOf(ctx context.Context, content bool, id int64) string {
	kind := "globalIds"
	if content {
		kind = "contentIds"
	}
	data, err := rc.get(ctx, "/ids/"+kind+"/"+strconv.FormatInt(id, 10))
	if err != nil {
		return "unknown id " + strconv.FormatInt(id, 10) + ": " + err.Error()
	}
	return string(data)
}

// resolveIDs replaces, in each record, the schema id of each registry part
// by "schema:" and the schema's content: in the id header, or in place of
// the magic byte and id before the datum; for Apicurio's JSON converter,
// {"schemaId":…,"payload":…} becomes {"schema":<content>,"payload":…}.
func (rc registryClient) resolveIDs(ctx context.Context, recs []Record, conf map[string]string) {
	for _, part := range registryParts(conf) {
		f := framingOf(conf, part)
		if avro, event := cloudEventsAvro(conf, part); avro {
			for i := range recs {
				rc.resolveCloudEvent(ctx, &recs[i], f, event)
			}
			continue
		}
		for i := range recs {
			r := &recs[i]
			if f.json {
				data := &r.Value
				if part == "key" {
					data = &r.Key
				}
				var framed struct {
					ID      int64           `json:"schemaId"`
					Payload json.RawMessage `json:"payload"`
				}
				if *data != nil && json.Unmarshal(*data, &framed) == nil {
					// {"schema":…,"payload":…}, as JsonConverter with
					// schemas would have it: json:PATH normalisations
					// apply.
					sch := rc.schemaOf(ctx, false, framed.ID)
					if !json.Valid([]byte(sch)) {
						sch = strconv.Quote(sch)
					}
					*data = Bytes(`{"schema":` + sch + `,"payload":` + string(framed.Payload) + `}`)
				}
				continue
			}
			if f.headers {
				for j, h := range r.Headers {
					if h.Key == "apicurio."+part+".globalId" || h.Key == "apicurio."+part+".contentId" {
						if len(h.Value) == 8 {
							id := int64(binary.BigEndian.Uint64(h.Value))
							r.Headers[j].Value = Bytes("schema:" + rc.schemaOf(ctx, h.Key == "apicurio."+part+".contentId", id))
						}
					}
				}
				continue
			}
			data := &r.Value
			if part == "key" {
				data = &r.Key
			}
			if len(*data) < 1+f.idSize || (*data)[0] != 0 {
				continue
			}
			var id int64
			if f.idSize == 4 {
				id = int64(binary.BigEndian.Uint32((*data)[1:5]))
			} else {
				id = int64(binary.BigEndian.Uint64((*data)[1:9]))
			}
			rest := (*data)[1+f.idSize:]
			*data = append(Bytes("schema:"+rc.schemaOf(ctx, f.content, id)+"|datum:"), rest...)
		}
	}
}

// registered is every version's content of every artifact, in any group,
// whose id starts with prefix, by its group and the id without it.
func (rc registryClient) registered(ctx context.Context, prefix string) (map[string][]string, error) {
	data, err := rc.get(ctx, "/search/artifacts?limit=1000")
	if err != nil {
		return nil, err
	}
	var list struct {
		Artifacts []struct {
			ID      string `json:"id"`
			GroupID string `json:"groupId"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range list.Artifacts {
		subject, ok := strings.CutPrefix(a.ID, prefix)
		if !ok {
			continue
		}
		group := a.GroupID
		if group == "" {
			group = "default"
		}
		subject = group + "/" + subject
		base := "/groups/" + url.PathEscape(group) + "/artifacts/" + url.PathEscape(a.ID)
		data, err := rc.get(ctx, base+"/versions")
		if err != nil {
			return nil, err
		}
		var vs struct {
			Versions []struct {
				Version string `json:"version"`
			} `json:"versions"`
		}
		if err := json.Unmarshal(data, &vs); err != nil {
			return nil, err
		}
		for _, v := range vs.Versions {
			content, err := rc.get(ctx, base+"/versions/"+url.PathEscape(v.Version))
			if err != nil {
				return nil, err
			}
			out[subject] = append(out[subject], string(content))
		}
	}
	return out, nil
}

// compareRegistered lists how the schemas registered under one side's
// subjects differ from the other's.
func compareRegistered(want, got map[string][]string) []string {
	var diffs []string
	subjects := map[string]bool{}
	for s := range want {
		subjects[s] = true
	}
	for s := range got {
		subjects[s] = true
	}
	for _, s := range slices.Sorted(func(yield func(string) bool) {
		for k := range subjects {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Equal(want[s], got[s]) {
			diffs = append(diffs, fmt.Sprintf("registered schemas of subject %s: Debezium %q, pgoutbox %q", s, want[s], got[s]))
		}
	}
	return diffs
}

// RegistryKey names a case's own registry settings, "" for none.
func (c Case) RegistryKey() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Registry)) {
		parts = append(parts, k+"="+c.Registry[k])
	}
	return strings.Join(parts, ",")
}

// registryAPI is the API of the registry the case runs against.
func (r *run) registryAPI() string {
	if k := r.c.RegistryKey(); k != "" {
		return r.env.Registries[k]
	}
	return r.env.RegistryAPI
}

// recordStrategy tells whether conf's part names its subjects after
// records (Apicurio's record strategies), which only records can pass.
func recordStrategy(conf map[string]string, part string) bool {
	return strings.Contains(conf[registryPrefix(conf, part)+"apicurio.registry.artifact-resolver-strategy"], "Record")
}
