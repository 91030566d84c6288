package redisstream

import "github.com/redis/go-redis/v9"

// link is the writer goroutine's way to the server: the writing
// connection to a server, or the cluster's client, and what was written
// on it.
type link struct {
	client  redis.UniversalClient
	cluster bool
	// conn is the writing connection to a server (not a cluster); nil
	// until used, and after it broke.
	conn *redis.Conn
	// unsettled: a cluster's client has not yet found out, since it was
	// made or since a batch's reply was lost, what the server kept.
	unsettled bool
	// last is, per stream, the entry this connection wrote last.
	last map[string]string
}

func newLink(client redis.UniversalClient, cluster bool) *link {
	return &link{client: client, cluster: cluster, unsettled: cluster, last: map[string]string{}}
}

// open opens the writing connection when there is none, and first runs
// settle, which finds out what the server kept of what was written
// before; on a cluster, only while that is unsettled.
func (l *link) open(settle func() error) error {
	if l.cluster {
		if l.unsettled {
			if err := settle(); err != nil {
				return err
			}
			l.unsettled = false
		}
		return nil
	}
	if l.conn != nil {
		return nil
	}
	l.conn = l.client.(*redis.Client).Conn()
	if err := settle(); err != nil {
		l.drop()
		return err
	}
	return nil
}

// target is what batches and lookups of written entries go to: the
// writing connection, or the cluster.
func (l *link) target() redis.Cmdable {
	if l.cluster {
		return l.client
	}
	return l.conn
}

// drop closes the writing connection, after it broke or left a batch
// unsure: the next one settles first.
func (l *link) drop() {
	l.unsettled = l.cluster
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn = nil
	}
	clear(l.last)
}

// close closes the connection and the client.
func (l *link) close() {
	if l.conn != nil {
		_ = l.conn.Close()
	}
	_ = l.client.Close()
}
