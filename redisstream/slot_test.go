package redisstream

import "testing"

// The slots redis-server 7.0.15's CLUSTER KEYSLOT gives.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739,
		"outbox.event.order":   13696,
		"outbox.event.Payment": 7374,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"foo{{bar}}zap":        4015,
		"foo{bar}{zap}":        5061,
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}
