package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"time"
)

// TimeLayout is the fixed-width UTC layout an event's time is hashed (and stored) in.
// Fixed width keeps lexical order equal to time order; microseconds are the precision
// every supported database keeps, so the log truncates event times to it on append.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// hashDomain separates this encoding from any other use of SHA-256 over the same bytes,
// and versions it: a change of encoding must change this string.
const hashDomain = "toolgate-audit-v1"

// ComputeHash returns the hex SHA-256 that chains e to the event before it. It covers
// prev and every field of e except Hash (and e.PrevHash, which prev replaces), in a
// fixed order, each length-prefixed, so no two different events encode alike however
// hostile their strings are (separators, NUL bytes, invalid UTF-8 included).
func ComputeHash(prev string, e *Event) string {
	h := sha256.New()
	w := chainWriter{h: h}
	w.str(hashDomain)
	w.str(prev)
	w.str(strconv.FormatInt(e.Seq, 10))
	w.str(e.Time.UTC().Format(TimeLayout))
	w.str(e.CallID)
	w.str(e.TurnID)
	w.str(e.Principal)
	w.str(e.Transport)
	w.str(e.Tool)
	w.str(e.Alias)
	w.str(e.Action)
	w.str(e.Resource)
	w.str(string(e.Decision))
	w.str(e.GrantID)
	w.str(e.Code)
	w.str(e.Message)
	w.str(strconv.FormatInt(e.LatencyMicros, 10))
	keys := make([]string, 0, len(e.Args))
	for k := range e.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w.str(strconv.Itoa(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(e.Args[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

type chainWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (w *chainWriter) str(s string) {
	n := binary.PutUvarint(w.buf[:], uint64(len(s)))
	w.h.Write(w.buf[:n])
	w.h.Write([]byte(s))
}

// ChainError says where the chain breaks and why.
type ChainError struct {
	// Seq is the first sequence number at which the chain is wrong: the edited,
	// misplaced or first missing event.
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit chain broken at seq %d: %s", e.Seq, e.Reason)
}

// Verifier checks a chain incrementally, so a log too large to hold in memory can be
// verified page by page. The zero value expects the chain's first event (seq 1).
type Verifier struct {
	n        int64
	lastSeq  int64
	lastHash string
}

// Add checks the next event. Events must be given in the order the log returns them
// (ascending seq); the first error is final.
func (v *Verifier) Add(e *Event) error {
	if v.n == 0 {
		if e.Seq != 1 {
			return &ChainError{Seq: 1, Reason: fmt.Sprintf("the chain starts at seq %d: earlier events are missing", e.Seq)}
		}
		if e.PrevHash != "" {
			return &ChainError{Seq: e.Seq, Reason: "the first event names a previous hash"}
		}
	} else {
		switch {
		case e.Seq <= v.lastSeq:
			return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("seq %d comes after seq %d: events are out of order or duplicated", e.Seq, v.lastSeq)}
		case e.Seq != v.lastSeq+1:
			missing := fmt.Sprintf("event %d is", v.lastSeq+1)
			if e.Seq-1 > v.lastSeq+1 {
				missing = fmt.Sprintf("events %d..%d are", v.lastSeq+1, e.Seq-1)
			}
			return &ChainError{Seq: v.lastSeq + 1, Reason: fmt.Sprintf("seq %d follows seq %d: %s missing (deleted) or out of order", e.Seq, v.lastSeq, missing)}
		case e.PrevHash != v.lastHash:
			return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("its previous hash does not match seq %d: an event was replaced or inserted", v.lastSeq)}
		}
	}
	if got := ComputeHash(e.PrevHash, e); got != e.Hash {
		return &ChainError{Seq: e.Seq, Reason: "its content does not match its hash: the event was edited"}
	}
	v.n++
	v.lastSeq = e.Seq
	v.lastHash = e.Hash
	return nil
}

// Head reports how many events were verified and the last one's seq and hash. Record
// the head somewhere the log's writer cannot reach: a chain only proves that nothing
// was changed before its head, so removing the newest events is detected only by
// comparing with a head recorded earlier.
func (v *Verifier) Head() (count, seq int64, hash string) { return v.n, v.lastSeq, v.lastHash }

// Verify checks a whole chain from its first event: every hash matches its event,
// every event names its predecessor's hash, and seq runs 1, 2, 3… without gaps. It
// detects edited, inserted, deleted and reordered events and names the first bad seq
// in a *ChainError.
func Verify(events []Event) error {
	var v Verifier
	for i := range events {
		if err := v.Add(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

// Truncate returns t in UTC at the precision events keep (microseconds).
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
