package outbox

// Polling columns: insertion order, the writing transaction, and the mark
// the poller sets once Kafka acknowledged a row.
const (
	SeqColumn       = "seq"
	TxIDColumn      = "txid"
	PublishedColumn = "published_at"
)

// FloorSQL is a Floor as SQL expressions: XID an xid8, and for rows
// copied from another cluster ForeignSeq (a bigint, NULL when there is no
// foreign floor) and ForeignXID (an xid8).
type FloorSQL struct{ XID, ForeignSeq, ForeignXID string }

// Floor is what polling may skip: rows that the WAL mode published and
// did not mark. Rows of transactions below XID were published on this
// cluster. Rows copied from another cluster (a dump and restore, an
// upgrade) keep that cluster's transaction ids, which mean nothing here:
// Foreign, when set, is the floor saved there, and a row is skipped on its
// strength only if its seq is at or below Foreign.Seq (it existed when
// that floor was read) and its txid below Foreign.XID. Every row written
// here has a seq above Foreign.Seq, because the sequence moved with the
// rows; so none of them is skipped by it.
type Floor struct {
	XID     uint64
	Foreign *ForeignFloor
}

// ForeignFloor is a floor saved on another cluster: its snapshot xmin and
// the outbox sequence's value read with it.
type ForeignFloor struct {
	XID uint64
	Seq int64
}
