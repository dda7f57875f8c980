package mcpserver

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A notification sent on an answer's stream after its handler returned (an
// upstream's progress for a call that outlived its request) is refused with
// errStreamEnded and writes nothing: writing to the finished response panicked
// inside net/http and took the daemon down (found by e2e/reliability.TestSoak,
// stateless clients cutting progress streams).
func TestSendAfterTheHandlerReturnedWritesNothing(t *testing.T) {
	late := make(chan *sseStream, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := newSSEStream(withWriteDeadline(w, DefaultWriteTimeout), "", nil)
		defer s.end()
		if err := s.send([]byte(`{"n":1}`)); err != nil {
			t.Errorf("send: %v", err)
		}
		late <- s
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := <-late
	for range 3 {
		if err := s.send([]byte(`{"n":2}`)); !errors.Is(err, errStreamEnded) {
			t.Errorf("send after the handler returned: %v, want errStreamEnded", err)
		}
		s.comment() // a keep-alive too
	}
	if got := string(body); !strings.Contains(got, `{"n":1}`) || strings.Contains(got, `{"n":2}`) {
		t.Errorf("body %q", got)
	}
}
