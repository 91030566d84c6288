package main

import (
	"flag"
	"fmt"

	"github.com/pgoutbox/pgoutbox/registry"
)

// registryFlags are one avro converter's schema registry flags
// (--key-registry-*, --value-registry-*).
type registryFlags struct {
	part               string
	url, api, useID    string
	strategy           string
	headers, autoReg   bool
	findLatest         bool
	idSize             int
	user, password, ca string
}

func registerRegistryFlags(fs *flag.FlagSet, part string) *registryFlags {
	r := &registryFlags{part: part}
	p := part + "-registry-"
	fs.StringVar(&r.url, p+"url", "", part+" converter avro: the schema registry's API, e.g. http://registry:8080/apis/registry/v2 (Apicurio apicurio.registry.url; Confluent schema.registry.url)")
	fs.StringVar(&r.api, p+"api", string(registry.Apicurio), part+" converter avro: apicurio (Apicurio's AvroConverter) or confluent (Confluent's AvroConverter, the Confluent-compatible API)")
	fs.BoolVar(&r.headers, p+"headers", true, part+" converter avro, apicurio: the schema id in apicurio.* headers, the datum bare (apicurio.registry.headers.enabled)")
	fs.IntVar(&r.idSize, p+"id-size", 0, part+" converter avro: the id's bytes after the magic byte, 8 (apicurio's default) or 4 (apicurio.registry.as-confluent, and confluent)")
	fs.StringVar(&r.useID, p+"use-id", "globalId", part+" converter avro, apicurio: the id written, globalId or contentId (apicurio.registry.use-id)")
	fs.BoolVar(&r.autoReg, p+"auto-register", true, part+" converter avro: register a new schema; false looks it up and dead-letters a record whose schema is not registered (auto-register, auto.register.schemas)")
	fs.BoolVar(&r.findLatest, p+"find-latest", false, part+" converter avro, apicurio, auto-register false: the subject's latest version (apicurio.registry.find-latest)")
	fs.StringVar(&r.strategy, p+"strategy", string(registry.TopicStrategy), part+" converter avro: the subject of a schema, topic (<topic>-"+part+"), simple-topic (<topic>), record (the record's name; apicurio: in its namespace's group), topic-record (<topic>-<record>) or qualified-record (apicurio: the record's full name)")
	fs.StringVar(&r.user, p+"user", "", part+" converter avro: the registry's basic auth user")
	fs.StringVar(&r.password, p+"password", "", part+" converter avro: the registry's basic auth password")
	fs.StringVar(&r.ca, p+"ca-file", "", part+" converter avro: PEM file of the CAs of the registry's https certificate")
	return r
}

// config is the registry's configuration, nil without --PART-registry-url.
func (r *registryFlags) config() (*registry.Config, error) {
	if r.url == "" {
		return nil, nil
	}
	c := &registry.Config{URL: r.url, API: registry.API(r.api), Headers: r.headers, IDSize: r.idSize,
		NoAutoRegister: !r.autoReg, FindLatest: r.findLatest, Username: r.user, Password: r.password, CAFile: r.ca,
		Strategy: registry.Strategy(r.strategy)}
	switch r.useID {
	case "globalId":
	case "contentId":
		c.ContentID = true
	default:
		return nil, fmt.Errorf("--%s-registry-use-id %q: use globalId or contentId", r.part, r.useID)
	}
	if c.API == registry.Confluent {
		c.Headers = false
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("--%s-registry-*: %w", r.part, err)
	}
	return c, nil
}
