// Package test holds pgoutbox's integration and end-to-end tests: a real
// PostgreSQL with logical replication (pgcluster) and a real
// Kafka-protocol broker (test/kafkatest), never a mock of either. Their
// harness is package test/testenv; each file holds the tests of one
// feature and is named for it.
package test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

func TestMain(m *testing.M) { pgcluster.Main(kafkatest.Main(m)) }
