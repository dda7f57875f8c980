package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenOpenWait bounds how long a dial waits for the standalone stream's
// first answer.
const listenOpenWait = 5 * time.Second

// listenRetries is how many times in a row the standalone stream may fail to
// deliver anything before it is given up (the connection itself goes on:
// requests' own streams still carry their notifications).
const listenRetries = 5

// listen holds the standalone GET stream of a Streamable HTTP session open:
// the only way a stateful server can send list_changed (or anything else)
// when no request is in flight. The go-sdk opens it only for its typed
// client, so it is done here: GET with the session id (the headerTransport adds
// the configured headers and Mcp-Protocol-Version), each SSE "message" event
// dispatched like any message read, Last-Event-ID on reconnect, the server's
// retry: honoured, backoff otherwise. 405 means the server offers no stream;
// 404 means the session is gone, which ends the connection.
func (c *Conn) listen(client *http.Client, endpoint, sessionID string, opened chan<- struct{}) {
	var once sync.Once
	open := func() { once.Do(func() { close(opened) }) }
	defer open()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 500 * time.Millisecond
	bo.MaxInterval = 30 * time.Second
	var lastID string
	failures := 0
	for {
		var retry time.Duration
		delivered := false
		req, err := http.NewRequestWithContext(c.life, http.MethodGet, endpoint, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sessionID)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := client.Do(req)
		open() // the first answer (or failure) is all the dial waits for
		switch {
		case c.life.Err() != nil:
			if resp != nil {
				resp.Body.Close()
			}
			return
		case err != nil:
			var auth *AuthRequiredError
			if errors.As(err, &auth) {
				c.closeWith(auth)
				return
			}
			c.log.Debug("upstream standalone stream: request failed", "error", c.redacted(err))
		case resp.StatusCode == http.StatusMethodNotAllowed:
			resp.Body.Close()
			c.log.Debug("upstream offers no standalone stream (405)")
			return
		case resp.StatusCode == http.StatusNotFound:
			resp.Body.Close()
			c.closeWith(fmt.Errorf("the server ended the session (HTTP 404): %w", mcp.ErrSessionMissing))
			return
		case resp.StatusCode/100 != 2 || !isEventStream(resp.Header.Get("Content-Type")):
			resp.Body.Close()
			c.log.Warn("upstream standalone stream refused; server notifications arrive only with requests",
				"status", resp.StatusCode, "content_type", resp.Header.Get("Content-Type"))
			return
		default:
			err = readEvents(resp.Body, c.opts.MaxMessageBytes, func(ev *sseEvent) {
				delivered = true
				if ev.id != "" {
					lastID = ev.id
				}
				if ev.retry > 0 {
					retry = ev.retry
				}
				if len(ev.data) == 0 || (ev.name != "" && ev.name != "message") {
					return
				}
				msg, err := jsonrpc.DecodeMessage(ev.data)
				if err != nil {
					c.st.badMessages.Add(1)
					return
				}
				c.dispatch(msg)
			})
			resp.Body.Close()
			var big *MessageTooLargeError
			if errors.As(err, &big) {
				n := c.st.oversized.Add(1)
				if logWorthy(n) {
					c.log.Warn("upstream event over the size cap; stream reopened", "limit", big.Limit)
				}
			}
		}
		if delivered {
			failures = 0
			bo.Reset()
		} else if failures++; failures > listenRetries {
			c.log.Warn("upstream standalone stream given up; server notifications arrive only with requests")
			return
		}
		delay := bo.NextBackOff()
		if retry > 0 {
			delay = retry
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return
		}
	}
}

func isEventStream(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "text/event-stream"
}

type sseEvent struct {
	name, id string
	data     []byte
	retry    time.Duration
}

// readEvents parses a text/event-stream body (the HTML standard's rules: a
// blank line ends an event, lines starting with ':' are comments, one space
// after the colon is dropped, data lines are joined with '\n') and calls fn for
// each event. One event is capped at max bytes.
func readEvents(r io.Reader, max int, fn func(*sseEvent)) error {
	br := bufio.NewReaderSize(r, 32<<10)
	var (
		ev      sseEvent
		hasData bool
		size    int
		line    []byte
	)
	for {
		line = line[:0]
		for {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if size+len(line) > max {
				return &MessageTooLargeError{Limit: max}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
		size += len(line)
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
		if len(line) == 0 {
			if hasData || ev.id != "" || ev.retry > 0 {
				fn(&ev)
			}
			ev, hasData, size = sseEvent{}, false, 0
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id = string(value)
			}
		case "retry":
			if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
				ev.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}
