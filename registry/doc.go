// Package registry registers and looks up the schemas of records in a
// schema registry, and frames each Avro datum as the Kafka Connect
// converters do: Apicurio's io.apicurio.registry.utils.converter.AvroConverter
// through Apicurio Registry's API (/apis/registry/v2) with its settings (the
// id in headers, or after a magic byte in 8 bytes or, as-confluent, 4;
// global or content ids), and Confluent's AvroConverter through the
// Confluent-compatible API (magic byte, 4-byte schema id); and Apicurio's
// ExtJsonConverter's JSON records, their Kafka Connect schemas registered as
// KCONNECT artifacts, framed as {"schemaId":…,"payload":…}. A schema is asked
// for once per part and content, as Apicurio's resolver caches it; then
// framing costs no request.
package registry
