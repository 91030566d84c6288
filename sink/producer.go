package sink

import (
	"fmt"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The codecs Config.Compression takes: Kafka's compression.type values.
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLz4    = "lz4"
	CompressionZstd   = "zstd"
)

// compressionLevels are the levels Kafka's producer takes per codec
// (compression.<codec>.level, KIP-390), checked as Kafka checks them.
var compressionLevels = map[string][2]int{
	CompressionGzip: {1, 9},
	CompressionLz4:  {1, 17},
	CompressionZstd: {-131072, 22},
}

// compression is the franz-go codec of the configuration. A level is
// given in Kafka's terms: gzip's are Go's; zstd's are mapped to the Go
// encoder's four speeds as its author maps libzstd's levels; lz4's 1 to 9
// are the Go encoder's levels, above 9 its highest.
func (c Config) compression() (kgo.CompressionCodec, error) {
	var codec kgo.CompressionCodec
	switch strings.ToLower(c.Compression) {
	case "", CompressionNone:
		if c.CompressionLevel != 0 {
			return codec, fmt.Errorf("kafka compression level %d without a compression codec", c.CompressionLevel)
		}
		return kgo.NoCompression(), nil
	case CompressionGzip:
		codec = kgo.GzipCompression()
	case CompressionSnappy:
		if c.CompressionLevel != 0 {
			return codec, fmt.Errorf("kafka compression level %d: snappy has no levels", c.CompressionLevel)
		}
		return kgo.SnappyCompression(), nil
	case CompressionLz4:
		codec = kgo.Lz4Compression()
	case CompressionZstd:
		codec = kgo.ZstdCompression()
	default:
		return codec, fmt.Errorf("kafka compression %q: use none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	name := strings.ToLower(c.Compression)
	lvl := c.CompressionLevel
	if lvl == 0 {
		return codec, nil
	}
	if r := compressionLevels[name]; lvl < r[0] || lvl > r[1] {
		return codec, fmt.Errorf("kafka compression level %d: %s takes %d to %d", lvl, name, r[0], r[1])
	}
	switch name {
	case CompressionLz4:
		return codec.WithLevel(int(lz4Level(lvl))), nil
	case CompressionZstd:
		return codec.WithLevel(int(zstd.EncoderLevelFromZstd(lvl))), nil
	}
	return codec.WithLevel(lvl), nil
}

// lz4Level is the Go encoder's level for Kafka's lz4 level (1-17).
func lz4Level(kafka int) lz4.CompressionLevel {
	levels := []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
	return levels[min(kafka, len(levels))-1]
}

// producerOpts are the client options of the producer settings a user
// may change: compression, request size and timeout. Acks and
// idempotence are not among them: the guarantees need acks from all
// in-sync replicas and an idempotent producer.
func (c Config) producerOpts() ([]kgo.Opt, error) {
	codec, err := c.compression()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.ProducerBatchCompression(codec)}
	if c.MaxRequestBytes > 0 {
		opts = append(opts, kgo.BrokerMaxWriteBytes(int32(c.MaxRequestBytes)))
	}
	if c.RequestTimeout > 0 {
		opts = append(opts, kgo.ProduceRequestTimeout(c.RequestTimeout))
	}
	return opts, nil
}

// validateProducer checks the producer settings.
func (c Config) validateProducer() error {
	if _, err := c.compression(); err != nil {
		return err
	}
	if c.MaxRequestBytes != 0 && (c.MaxRequestBytes < c.MaxMessageBytes || c.MaxRequestBytes > 1<<30) {
		// franz-go refuses a request limit below its batch limit, which
		// is the largest record.
		return fmt.Errorf("kafka max request bytes %d: must be between max message bytes (%d) and 1 GiB", c.MaxRequestBytes, c.MaxMessageBytes)
	}
	if c.RequestTimeout < 0 || c.RequestTimeout > 15*time.Minute {
		return fmt.Errorf("kafka request timeout %s: must be between 0 and 15m", c.RequestTimeout)
	}
	return nil
}
