package rocketmq

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// RocketMQ's remoting protocol, as its Java client speaks it to a name
// server and a broker: each frame a big-endian length, then the header's
// length (its top byte the header's encoding, 0 for JSON), the header as
// JSON, the body.

// Request codes (RequestCode).
const (
	codeSendBatch = 320 // SEND_BATCH_MESSAGE
	codeRoute     = 105 // GET_ROUTEINFO_BY_TOPIC
)

// Response codes (ResponseCode, RemotingSysResponseCode).
const (
	respSuccess         = 0
	respSystemError     = 1
	respSystemBusy      = 2
	respFlushDisk       = 10
	respSlaveNotAvail   = 11
	respFlushSlave      = 12
	respMessageIllegal  = 13
	respServiceNotAvail = 14
	respNoPermission    = 16
	respTopicNotExist   = 17
)

// version is what the header names as the client's version: the Java
// client 5.2.0's (MQVersion.Version.V5_2_0), which Debezium Server 3.6.1
// ships.
const version = 453

// maxFrame bounds a frame read: a broker's answer is small, a route's
// some kilobytes.
const maxFrame = 16 << 20

// flagResponse marks a frame as an answer (RemotingCommand's RPC_TYPE bit).
const flagResponse = 1

// command is a frame: its header and body.
type command struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Serialize string            `json:"serializeTypeCurrentRPC"`
	body      []byte
}

// request is a request of code with ext as its header's fields.
func request(code int, ext map[string]string, body []byte) *command {
	return &command{Code: code, Language: "GO", Version: version, ExtFields: ext, Serialize: "JSON", body: body}
}

// sign adds an access key and the request's signature, as the Java
// client's AclClientRPCHook: HMAC-SHA1 with the secret key of the header
// fields' values in the order of their names, AccessKey among them, then
// the body; in base64.
func (c *command) sign(accessKey, secretKey string) {
	if accessKey == "" {
		return
	}
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	c.ExtFields["AccessKey"] = accessKey
	names := make([]string, 0, len(c.ExtFields))
	for k := range c.ExtFields {
		if k != "Signature" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(secretKey))
	for _, k := range names {
		mac.Write([]byte(c.ExtFields[k]))
	}
	mac.Write(c.body)
	c.ExtFields["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// appendFrame appends c's frame to b.
func appendFrame(b []byte, c *command) ([]byte, error) {
	h, err := json.Marshal(c)
	if err != nil {
		return b, err
	}
	if len(h) > 0xFFFFFF {
		return b, errors.New("rocketmq: a request's header is too long")
	}
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(h)+len(c.body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h))) // JSON: top byte 0
	b = append(b, h...)
	return append(b, c.body...), nil
}

// readFrame reads one frame.
func readFrame(r io.Reader) (*command, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size < 4 || size > maxFrame {
		return nil, fmt.Errorf("rocketmq: a frame of %d bytes", size)
	}
	f := make([]byte, size)
	if _, err := io.ReadFull(r, f); err != nil {
		return nil, err
	}
	return parseFrame(f)
}

// parseFrame reads a frame without its length.
func parseFrame(f []byte) (*command, error) {
	if len(f) < 4 {
		return nil, errors.New("rocketmq: a frame without header")
	}
	mark := binary.BigEndian.Uint32(f)
	hl := int(mark & 0xFFFFFF)
	if mark>>24 != 0 {
		return nil, fmt.Errorf("rocketmq: a header in encoding %d, not JSON", mark>>24)
	}
	if hl > len(f)-4 {
		return nil, fmt.Errorf("rocketmq: a header of %d bytes in a frame of %d", hl, len(f))
	}
	c := &command{}
	if err := json.Unmarshal(f[4:4+hl], c); err != nil {
		return nil, fmt.Errorf("rocketmq: a header that is not JSON: %w", err)
	}
	if len(f) > 4+hl {
		c.body = f[4+hl:]
	}
	return c, nil
}

// Property separators (MessageDecoder's NAME_VALUE_SEPARATOR and
// PROPERTY_SEPARATOR).
const (
	nameValueSep = '\x01'
	propertySep  = '\x02'
)

// appendProperty appends a property as MessageDecoder.messageProperties2String
// writes it.
func appendProperty(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, nameValueSep)
	b = append(b, value...)
	return append(b, propertySep)
}

// appendMessage appends a message of a batch's body as the Java client's
// MessageDecoder.encodeMessage writes it: its size, a magic code and a
// body CRC the broker fills in, its flag, its body and its properties.
func appendMessage(b, body, props []byte) []byte {
	size := messageOverhead + len(body) + len(props)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, 0) // magic code
	b = binary.BigEndian.AppendUint32(b, 0) // body CRC
	b = binary.BigEndian.AppendUint32(b, 0) // flag
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...)
}

// messageOverhead is a message's bytes in a batch besides its body and
// properties.
const messageOverhead = 4 + 4 + 4 + 4 + 4 + 2

// maxProperties is the most bytes of a message's properties (a short).
const maxProperties = 32767

// route is a topic's route as a name server answers it.
type route struct {
	OrderTopicConf string `json:"orderTopicConf"`
	QueueDatas     []struct {
		BrokerName     string `json:"brokerName"`
		WriteQueueNums int    `json:"writeQueueNums"`
		Perm           int    `json:"perm"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		BrokerName  string            `json:"brokerName"`
		BrokerAddrs map[string]string `json:"brokerAddrs"`
	} `json:"brokerDatas"`
	Mapping map[string]json.RawMessage `json:"topicQueueMappingByBroker"`
}

// queue is a message queue: its broker's name and master's address, and
// its id.
type queue struct {
	broker, addr string
	id           int
}

// permWrite is the write permission's bit (PermName.PERM_WRITE).
const permWrite = 2

// parseRoute reads a route's body. A name server writes a broker's
// addresses as a map keyed by numbers without quotes ({0:"host:port"}),
// which is not JSON: they are quoted first.
func parseRoute(body []byte) (*route, error) {
	r := &route{}
	if err := json.Unmarshal(quoteKeys(body), r); err != nil {
		return nil, fmt.Errorf("rocketmq: a topic's route that is not JSON: %w", err)
	}
	return r, nil
}

// quoteKeys quotes the bare numbers that stand as object keys in b.
func quoteKeys(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	inString, escaped, keyPlace := false, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, keyPlace = true, false
		case c == '{' || c == ',':
			keyPlace = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case keyPlace && (c == '-' || '0' <= c && c <= '9'):
			j := i
			for j < len(b) && (b[j] == '-' || '0' <= b[j] && b[j] <= '9') {
				j++
			}
			k := j
			for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
				k++
			}
			if k < len(b) && b[k] == ':' {
				out = append(out, '"')
				out = append(out, b[i:j]...)
				out = append(out, '"')
				i = j - 1
				keyPlace = false
				continue
			}
			keyPlace = false
		default:
			keyPlace = false
		}
		out = append(out, c)
	}
	return out
}

// queues are the topic's write queues in the order the Java client lists
// them (MQClientInstance.topicRouteData2TopicPublishInfo): by broker name,
// each broker's from 0, a broker without a master left out; or as its
// orderTopicConf lists them. limit, above 0, bounds each broker's count
// (a topic the broker creates from TBW102 has at most the client's
// defaultTopicQueueNums, 4).
func (r *route) queues(limit int) ([]queue, error) {
	if len(r.Mapping) > 0 && r.OrderTopicConf == "" {
		return nil, errors.New("rocketmq: a static topic (logic queues mapped across brokers), which pgoutbox does not publish to")
	}
	master := func(name string) string {
		for _, b := range r.BrokerDatas {
			if b.BrokerName == name {
				return b.BrokerAddrs["0"]
			}
		}
		return ""
	}
	var out []queue
	if r.OrderTopicConf != "" {
		for _, item := range strings.Split(r.OrderTopicConf, ";") {
			name, n, ok := strings.Cut(item, ":")
			var nums int
			if _, err := fmt.Sscanf(n, "%d", &nums); !ok || err != nil {
				return nil, fmt.Errorf("rocketmq: an orderTopicConf %q", r.OrderTopicConf)
			}
			for i := 0; i < nums; i++ {
				out = append(out, queue{broker: name, addr: master(name), id: i})
			}
		}
		return out, nil
	}
	qds := r.QueueDatas
	sort.SliceStable(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	for _, qd := range qds {
		addr := master(qd.BrokerName)
		if qd.Perm&permWrite == 0 || addr == "" {
			continue
		}
		n := qd.WriteQueueNums
		if limit > 0 && n > limit {
			n = limit
		}
		for i := 0; i < n; i++ {
			out = append(out, queue{broker: qd.BrokerName, addr: addr, id: i})
		}
	}
	return out, nil
}

// pick is the queue of qs a key's text picks, as the Java client's
// SelectMessageQueueByHash: Java's String.hashCode of the key, its
// remainder by the count made positive.
func pick(key string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	v := int(h) % n
	if v < 0 {
		v = -v
	}
	return v
}

// ids makes message ids as the Java client's MessageClientIDSetter does
// (UNIQ_KEY): in hex, the host's address, the process id, a number of this
// process, the milliseconds since the month began and a counter. One
// goroutine uses it.
type ids struct {
	fix          []byte
	start, until time.Time
	counter      uint16
}

func newIDs() *ids {
	fix := make([]byte, 0, 10)
	fix = append(fix, hostIP()...)
	fix = binary.BigEndian.AppendUint16(fix, uint16(os.Getpid()))
	fix = binary.BigEndian.AppendUint32(fix, uint32(time.Now().UnixNano()))
	return &ids{fix: fix}
}

// hostIP is the first IPv4 address of the host that is not loopback, else
// 127.0.0.1.
func hostIP() []byte {
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				if v4 := n.IP.To4(); v4 != nil {
					return v4
				}
			}
		}
	}
	return []byte{127, 0, 0, 1}
}

// next is a new message id.
func (g *ids) next(now time.Time) string {
	if !now.Before(g.until) {
		y, m, _ := now.Date()
		g.start = time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
		g.until = g.start.AddDate(0, 1, 0)
	}
	b := make([]byte, 0, 16)
	b = append(b, g.fix...)
	b = binary.BigEndian.AppendUint32(b, uint32(now.Sub(g.start).Milliseconds()))
	b = binary.BigEndian.AppendUint16(b, g.counter)
	g.counter++
	return strings.ToUpper(hex.EncodeToString(b))
}

// answerError is a broker's or name server's answer other than success;
// signed tells the request carried an access key.
type answerError struct {
	Code   int
	Remark string
	signed bool
}

func (e *answerError) Error() string {
	what := ""
	switch e.Code {
	case respSystemBusy:
		what = "the broker is busy"
	case respFlushDisk, respFlushSlave, respSlaveNotAvail:
		what = "the broker stored the messages but not durably in time"
	case respMessageIllegal:
		what = "the broker refused a message"
	case respServiceNotAvail:
		what = "the broker does not take messages now"
	case respNoPermission:
		what = "no permission (check the topic's and the broker's perm, and the access key's and its secret key)"
		if !e.signed {
			what = "no permission (a broker with ACL takes only requests signed with an access key: set --rocketmq-access-key and --rocketmq-secret-key, in a Debezium Server file producer.acl.enabled with producer.access.key and producer.secret.key; else check the topic's and the broker's perm)"
		}
	case respTopicNotExist:
		what = "no such topic (create it, or let the broker create topics: autoCreateTopicEnable)"
	case respSystemError:
		what = "the broker failed"
	}
	if what != "" {
		what += ": "
	}
	return fmt.Sprintf("%scode %d: %s", what, e.Code, strings.TrimSpace(e.Remark))
}

// isText tells s may be a property's name or value: it holds none of the
// characters that separate properties, nor NUL.
func isText(s string) bool { return !strings.ContainsAny(s, "\x00\x01\x02") }
