package host

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// An upstream's request or log message reaches a call only when that call is the one
// in flight on the connection that takes them, or the latest of several of one caller
// session: with two callers' calls, neither is asked or told.
func TestRouterOnlyOneCall(t *testing.T) {
	var rt router
	ctx := context.Background()
	if _, err := rt.request(ctx, "elicitation/create", nil); !errors.Is(err, ErrNoRequestTarget) {
		t.Fatalf("no call: %v", err)
	}
	var told []string
	a := &CallOptions{
		Request: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"a":1.50}`), nil
		},
		Notify: func(_ string, p json.RawMessage) { told = append(told, "a:"+string(p)) },
	}
	removeA := rt.add(a)
	res, err := rt.request(ctx, "elicitation/create", json.RawMessage(`{}`))
	if err != nil || string(res) != `{"a":1.50}` {
		t.Fatalf("one call: %s, %v", res, err)
	}
	rt.notify("notifications/message", json.RawMessage(`1`))
	// A call that takes neither does not make the route ambiguous.
	removePlain := rt.add(&CallOptions{SessionKey: "x"})
	rt.notify("notifications/message", json.RawMessage(`2`))
	b := &CallOptions{
		Request: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			t.Error("the second call was asked")
			return nil, nil
		},
		Notify: func(_ string, p json.RawMessage) { told = append(told, "b:"+string(p)) },
	}
	removeB := rt.add(b)
	if _, err := rt.request(ctx, "sampling/createMessage", nil); !errors.Is(err, ErrNoRequestTarget) {
		t.Errorf("two calls: %v", err)
	}
	rt.notify("notifications/message", json.RawMessage(`3`))
	removeA()
	rt.notify("notifications/message", json.RawMessage(`4`))
	removeB()
	removePlain()
	rt.notify("notifications/message", json.RawMessage(`5`))
	// Two calls of one caller session: the latest is asked.
	older := &CallOptions{SessionKey: "turn-1", Request: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"older"`), nil
	}}
	newer := &CallOptions{SessionKey: "turn-1", Request: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"newer"`), nil
	}}
	rmOlder, rmNewer := rt.add(older), rt.add(newer)
	if res, err := rt.request(ctx, "roots/list", nil); err != nil || string(res) != `"newer"` {
		t.Errorf("one session's two calls: %s, %v", res, err)
	}
	other := rt.add(&CallOptions{SessionKey: "turn-2", Request: older.Request})
	if _, err := rt.request(ctx, "roots/list", nil); !errors.Is(err, ErrNoRequestTarget) {
		t.Errorf("two sessions' calls: %v", err)
	}
	other()
	rmNewer()
	if res, _ := rt.request(ctx, "roots/list", nil); string(res) != `"older"` {
		t.Errorf("after the latest ended: %s", res)
	}
	rmOlder()
	if want := []string{"a:1", "a:2", "b:4"}; len(told) != len(want) || told[0] != want[0] || told[1] != want[1] || told[2] != want[2] {
		t.Errorf("told %v, want %v", told, want)
	}
}
