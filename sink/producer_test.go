package sink

import (
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Each codec and level as Kafka names them, and the refusals naming what
// is wrong.
func TestCompressionConfig(t *testing.T) {
	for _, tt := range []struct {
		codec string
		level int
		want  kgo.CompressionCodec
		err   string
	}{
		{"", 0, kgo.NoCompression(), ""},
		{"none", 0, kgo.NoCompression(), ""},
		{"gzip", 0, kgo.GzipCompression(), ""},
		{"GZIP", 9, kgo.GzipCompression().WithLevel(9), ""},
		{"snappy", 0, kgo.SnappyCompression(), ""},
		{"lz4", 0, kgo.Lz4Compression(), ""},
		{"lz4", 3, kgo.Lz4Compression().WithLevel(int(lz4.Level3)), ""},
		{"lz4", 17, kgo.Lz4Compression().WithLevel(int(lz4.Level9)), ""},
		{"zstd", 0, kgo.ZstdCompression(), ""},
		{"zstd", 19, kgo.ZstdCompression().WithLevel(int(zstd.SpeedBestCompression)), ""},
		{"zstd", -5, kgo.ZstdCompression().WithLevel(int(zstd.SpeedFastest)), ""},
		{"brotli", 0, kgo.CompressionCodec{}, `kafka compression "brotli": use none, gzip, snappy, lz4 or zstd`},
		{"gzip", 10, kgo.CompressionCodec{}, "kafka compression level 10: gzip takes 1 to 9"},
		{"lz4", 18, kgo.CompressionCodec{}, "kafka compression level 18: lz4 takes 1 to 17"},
		{"snappy", 1, kgo.CompressionCodec{}, "snappy has no levels"},
		{"none", 3, kgo.CompressionCodec{}, "without a compression codec"},
	} {
		cfg := Config{Brokers: []string{"k:9092"}, Compression: tt.codec, CompressionLevel: tt.level}
		cfg.Defaults()
		got, err := cfg.compression()
		verr := cfg.Validate()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || verr == nil {
				t.Errorf("%s %d: %v (Validate: %v), want %q", tt.codec, tt.level, err, verr, tt.err)
			}
			continue
		}
		if err != nil || verr != nil || got != tt.want {
			t.Errorf("%s %d: %+v %v %v, want %+v", tt.codec, tt.level, got, err, verr, tt.want)
		}
	}
}

func TestProducerLimitsValidation(t *testing.T) {
	for _, tt := range []struct {
		request int
		timeout time.Duration
		err     string
	}{
		{0, 0, ""},
		{2 << 20, 30 * time.Second, ""},
		{1000, 0, "kafka max request bytes 1000: must be between max message bytes (1000012) and 1 GiB"},
		{2 << 30, 0, "must be between"},
		{0, -time.Second, "kafka request timeout -1s"},
	} {
		cfg := Config{Brokers: []string{"k:9092"}, MaxRequestBytes: tt.request, RequestTimeout: tt.timeout}
		cfg.Defaults()
		err := cfg.Validate()
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%d %s: %v, want %q", tt.request, tt.timeout, err, tt.err)
		}
	}
}
