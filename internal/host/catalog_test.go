package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
)

// odd is an item whose bytes a decode/re-encode round trip would change: spacing, key
// order, an unknown field, escapes, a big number.
var odd = json.RawMessage(`{ "zeta":1, "name" : "odd","inputSchema":{"type":"object"},"x-unknown":{"n":12345678901234567890,"s":"\u00e9\/"} }`)

func wantItems(t *testing.T, what string, got, want []json.RawMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d items, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s[%d] = %s, want the upstream's bytes %s", what, i, got[i], want[i])
		}
	}
}

func TestCatalogFetchedAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ts := append(tools("t1", "t2", "t3", "t4"), odd)
		res := []json.RawMessage{json.RawMessage(`{"uri":"file:///a","name":"a"}`)}
		tmpl := []json.RawMessage{json.RawMessage(`{"uriTemplate":"file:///{p}","name":"f"}`)}
		prompts := []json.RawMessage{json.RawMessage(`{"name":"p","arguments":[{"name":"x"}]}`)}
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.Tools, b.Resources, b.ResourceTemplates, b.Prompts = ts, res, tmpl, prompts
			b.PageSize = 2
		})
		e.install(def("a"))
		if _, ok := e.h.Catalog("a"); ok {
			t.Fatal("catalogue known before any fetch")
		}
		e.mustCall("a")
		synctest.Wait()
		c, ok := e.h.Catalog("a")
		if !ok || c.Version != 1 || !strings.HasPrefix(c.Digest, "sha256:") || c.Truncated {
			t.Fatalf("catalogue: ok %v %+v", ok, c)
		}
		wantItems(t, "tools", c.Tools, ts)
		wantItems(t, "resources", c.Resources, res)
		wantItems(t, "resource templates", c.ResourceTemplates, tmpl)
		wantItems(t, "prompts", c.Prompts, prompts)
		if got := e.d.Last("a").ListCalls("tools/list"); got != 3 {
			t.Fatalf("tools/list pages: %d, want 3 (5 tools, 2 a page)", got)
		}
		if c.Info.ProtocolVersion != hosttest.DefaultInfo.ProtocolVersion || !bytes.Equal(c.Info.ServerInfo, hosttest.DefaultInfo.ServerInfo) {
			t.Fatalf("handshake not kept: %+v", c.Info)
		}
		evs := e.rec.Catalogs("a")
		if len(evs) != 1 || evs[0].Version != 1 || evs[0].Counts != (host.Counts{Tools: 5, Resources: 1, ResourceTemplates: 1, Prompts: 1}) {
			t.Fatalf("catalogue events: %+v", evs)
		}
		if st := e.status("a"); st.Catalog.Version != 1 || st.Catalog.Counts.Tools != 5 || st.Catalog.Error != "" {
			t.Fatalf("status catalogue: %+v", st.Catalog)
		}
		stored, ok := e.cats.Get("a")
		if !ok || stored.Version != 1 || stored.Digest != c.Digest {
			t.Fatalf("persisted: %v %+v", ok, stored)
		}
		wantItems(t, "persisted tools", stored.Tools, ts)
	})
}

func TestCatalogOnlyAdvertisedLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.Info = host.SessionInfo{ProtocolVersion: "2025-03-26", Capabilities: json.RawMessage(`{"tools":{},"prompts":null,"logging":{}}`)}
			b.Tools = tools("t")
			b.Resources = []json.RawMessage{json.RawMessage(`{"uri":"x"}`)}
			b.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p"}`)}
		})
		e.install(def("a"))
		e.mustCall("a")
		synctest.Wait()
		s := e.d.Last("a")
		for _, m := range []string{"resources/list", "resources/templates/list", "prompts/list"} {
			if n := s.ListCalls(m); n != 0 {
				t.Errorf("%s called %d times; the server does not advertise it", m, n)
			}
		}
		if c, _ := e.h.Catalog("a"); len(c.Tools) != 1 || c.Resources != nil || c.Prompts != nil {
			t.Fatalf("catalogue %+v", c.Counts())
		}
	})
}

func TestCatalogVersionBumpsOnlyOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = tools("t1") })
		e.install(def("a"))
		e.mustCall("a")
		// A restart fetches again; the same content is the same version.
		if err := e.h.Restart("a"); err != nil {
			t.Fatal(err)
		}
		e.mustCall("a")
		synctest.Wait()
		if n := e.d.Last("a").ListCalls("tools/list"); n != 1 {
			t.Fatalf("the restarted session fetched tools %d times", n)
		}
		if c, _ := e.h.Catalog("a"); c.Version != 1 || len(e.rec.Catalogs("a")) != 1 {
			t.Fatalf("same content: version %d, %d events", c.Version, len(e.rec.Catalogs("a")))
		}
		if _, err := e.h.RefreshCatalog(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if c, _ := e.h.Catalog("a"); c.Version != 1 {
			t.Fatalf("explicit refresh of the same content bumped to %d", c.Version)
		}
		// A change (even one byte) is a new version.
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.Tools = []json.RawMessage{json.RawMessage(`{"name":"t1","inputSchema":{"type":"object"} }`)}
		})
		c, err := e.h.RefreshCatalog(context.Background(), "a")
		if err != nil || c.Version != 2 {
			t.Fatalf("changed content: version %d, %v", c.Version, err)
		}
		synctest.Wait()
		if evs := e.rec.Catalogs("a"); len(evs) != 2 || evs[1].Version != 2 {
			t.Fatalf("events %+v", evs)
		}
		if stored, _ := e.cats.Get("a"); stored.Version != 2 {
			t.Fatalf("persisted version %d", stored.Version)
		}
	})
}

func TestListChangedDebounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = tools("t1"); b.Prompts = tools("p1") })
		e.install(def("a"))
		e.mustCall("a")
		synctest.Wait()
		s := e.d.Last("a")
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = tools("t1", "t2") })
		for range 20 {
			s.Notify("notifications/tools/list_changed")
		}
		s.Notify("notifications/message") // not a catalogue change
		synctest.Wait()
		if n := s.ListCalls("tools/list"); n != 1 {
			t.Fatalf("refetched before the debounce: %d", n)
		}
		advance(host.DefaultCatalogDebounce)
		if n := s.ListCalls("tools/list"); n != 2 {
			t.Fatalf("20 list_changed cost %d refetches, want 1", n-1)
		}
		if n := s.ListCalls("prompts/list"); n != 1 {
			t.Fatalf("tools/list_changed refetched prompts (%d)", n)
		}
		c, _ := e.h.Catalog("a")
		if c.Version != 2 || len(c.Tools) != 2 || len(c.Prompts) != 1 {
			t.Fatalf("after list_changed: version %d %+v", c.Version, c.Counts())
		}
		// resources/list_changed refreshes resources and templates.
		s.Notify("notifications/resources/list_changed")
		advance(host.DefaultCatalogDebounce)
		if s.ListCalls("resources/list") != 2 || s.ListCalls("resources/templates/list") != 2 || s.ListCalls("tools/list") != 2 {
			t.Fatalf("resources/list_changed fetched: res %d tmpl %d tools %d", s.ListCalls("resources/list"), s.ListCalls("resources/templates/list"), s.ListCalls("tools/list"))
		}
		if c, _ := e.h.Catalog("a"); c.Version != 2 {
			t.Fatalf("unchanged resources bumped the version to %d", c.Version)
		}
	})
}

func TestPersistedCatalogAnswersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cats := hosttest.NewCatalogs()
		d1 := hosttest.NewDialer()
		d1.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = append(tools("t1"), odd) })
		h1, err := host.New(host.Options{Dialer: d1, Catalogs: cats, Servers: []host.Definition{def("a")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h1.RefreshCatalog(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		first, _ := h1.Catalog("a")
		if err := h1.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}

		// A restarted toolgate whose upstream now hangs.
		e := newEnv(t, func(o *host.Options) { o.Catalogs = cats })
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialHang = true; b.Tools = append(tools("t1"), odd) })
		e.install(def("a"))
		start := time.Now()
		c, ok := e.h.Catalog("a")
		if !ok || c.Version != first.Version || c.Digest != first.Digest || time.Since(start) != 0 {
			t.Fatalf("persisted catalogue: ok %v version %d", ok, c.Version)
		}
		wantItems(t, "persisted tools", c.Tools, first.Tools)
		if e.d.Dials("a") != 0 {
			t.Fatal("answering from the persisted catalogue started the server")
		}
		if st := e.status("a"); st.Catalog.Version != 1 || st.Catalog.Counts.Tools != 2 || st.State != host.StateNotStarted {
			t.Fatalf("status: %+v", st)
		}
		// Once it answers with the same content the version stays; no event.
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.DialHang = false })
		if _, err := e.h.RefreshCatalog(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if c, _ := e.h.Catalog("a"); c.Version != 1 || len(e.rec.Catalogs("a")) != 0 {
			t.Fatalf("unchanged after restart: version %d, %d events", c.Version, len(e.rec.Catalogs("a")))
		}
	})
}

func TestCatalogBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy host.CatalogPolicy
		setup  func(b *hosttest.Behavior)
		check  func(t *testing.T, c host.Catalog, st host.Status)
	}{{
		name:   "items",
		policy: host.CatalogPolicy{MaxItems: 3},
		setup:  func(b *hosttest.Behavior) { b.Tools = tools("1", "2", "3", "4", "5"); b.PageSize = 2 },
		check: func(t *testing.T, c host.Catalog, st host.Status) {
			if len(c.Tools) != 3 || !c.Truncated || !st.Catalog.Truncated {
				t.Fatalf("%d tools, truncated %v", len(c.Tools), c.Truncated)
			}
		},
	}, {
		name:   "bytes",
		policy: host.CatalogPolicy{MaxBytes: 100},
		setup:  func(b *hosttest.Behavior) { b.Tools = tools("1", "2", "3") }, // 44 bytes each
		check: func(t *testing.T, c host.Catalog, _ host.Status) {
			if len(c.Tools) != 2 || !c.Truncated {
				t.Fatalf("%d tools, truncated %v", len(c.Tools), c.Truncated)
			}
		},
	}, {
		name:   "items across lists",
		policy: host.CatalogPolicy{MaxItems: 2},
		setup: func(b *hosttest.Behavior) {
			b.Tools = tools("1", "2")
			b.Prompts = tools("p")
		},
		check: func(t *testing.T, c host.Catalog, _ host.Status) {
			if c.Counts().Tools+c.Counts().Prompts != 2 || !c.Truncated {
				t.Fatalf("%+v truncated %v", c.Counts(), c.Truncated)
			}
		},
	}, {
		name:   "endless pages",
		policy: host.CatalogPolicy{MaxPages: 4},
		setup: func(b *hosttest.Behavior) {
			b.Tools = tools("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
			b.PageSize = 1
		},
		check: func(t *testing.T, c host.Catalog, _ host.Status) {
			if len(c.Tools) != 4 || !c.Truncated {
				t.Fatalf("%d tools, truncated %v", len(c.Tools), c.Truncated)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(o *host.Options) { o.Catalog = tc.policy })
				e.d.Server("a").Set(tc.setup)
				e.install(def("a"))
				c, err := e.h.RefreshCatalog(context.Background(), "a")
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c, e.status("a"))
			})
		})
	}
}

func TestHostileListAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     string
		wantErr string
		tools   int
		dropped int
	}{
		{"not json", `{"tools":[`, "not a list object", 0, 0},
		{"not an object", `[1,2]`, "not a list object", 0, 0},
		{"tools not an array", `{"tools":{"name":"x"}}`, "not a list object", 0, 0},
		{"items not objects", `{"tools":[1,"x",null,[],{"name":"ok"},true]}`, "", 1, 5},
		{"cursor loop", `{"tools":[{"name":"x"}],"nextCursor":"same"}`, "nextCursor repeats", 0, 0},
		{"null list", `{"tools":null}`, "", 0, 0},
		{"cursor not a string", `{"tools":[],"nextCursor":7}`, "not a list object", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				e.d.Server("a").Set(func(b *hosttest.Behavior) {
					b.ListRaw = map[string]json.RawMessage{"tools/list": json.RawMessage(tc.raw)}
				})
				e.install(def("a"))
				c, err := e.h.RefreshCatalog(context.Background(), "a")
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if len(c.Tools) != tc.tools || c.Dropped != tc.dropped {
					t.Fatalf("%d tools, %d dropped; want %d, %d", len(c.Tools), c.Dropped, tc.tools, tc.dropped)
				}
				st := e.status("a")
				if st.State != host.StateReady {
					t.Fatalf("a bad list answer took the server to %s", st.State)
				}
				if (tc.wantErr != "") != (st.Catalog.Error != "") {
					t.Fatalf("status catalogue error %q", st.Catalog.Error)
				}
				e.mustCall("a")
			})
		})
	}
}

func TestFailedListKeepsPreviousItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = tools("t"); b.Prompts = tools("p") })
		e.install(def("a"))
		if _, err := e.h.RefreshCatalog(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		e.d.Server("a").Set(func(b *hosttest.Behavior) {
			b.ListErr = map[string]error{"tools/list": errors.New("internal error")}
			b.Prompts = tools("p", "q")
		})
		c, err := e.h.RefreshCatalog(context.Background(), "a")
		if err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Fatalf("refresh: %v", err)
		}
		if len(c.Tools) != 1 || len(c.Prompts) != 2 || c.Version != 2 {
			t.Fatalf("after a failed tools/list: %+v version %d", c.Counts(), c.Version)
		}
	})
}

func TestCatalogSaveFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.cats.FailSaves(errors.New("disk full"))
		e.d.Server("a").Set(func(b *hosttest.Behavior) { b.Tools = tools("t") })
		e.install(def("a"))
		c, err := e.h.RefreshCatalog(context.Background(), "a")
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("refresh with a failing store: %v", err)
		}
		if len(c.Tools) != 1 {
			t.Fatal("a failed save lost the fetched catalogue")
		}
		if st := e.status("a"); !strings.Contains(st.Catalog.Error, "disk full") || st.State != host.StateReady {
			t.Fatalf("status: %+v", st)
		}
		// The next refresh saves what the store missed, though nothing changed.
		e.cats.FailSaves(nil)
		if _, err := e.h.RefreshCatalog(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if stored, ok := e.cats.Get("a"); !ok || stored.Digest != c.Digest {
			t.Fatal("the unsaved catalogue was never saved")
		}
		if st := e.status("a"); st.Catalog.Error != "" {
			t.Fatalf("catalogue error after a good save: %q", st.Catalog.Error)
		}
	})
}

func TestSessionServerCatalogue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		d := def("p")
		d.Isolation = host.IsolationSession
		e.d.Server("p").Set(func(b *hosttest.Behavior) { b.Tools = tools("t") })
		e.install(d)
		if _, err := e.callKey("p", "k1"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if c, ok := e.h.Catalog("p"); !ok || len(c.Tools) != 1 {
			t.Fatal("the first per-session connection did not fetch the catalogue")
		}
		if _, err := e.callKey("p", "k2"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := e.d.Last("p").ListCalls("tools/list"); n != 0 {
			t.Fatalf("every new per-session connection refetched (%d)", n)
		}
		// list_changed on any of them refreshes.
		e.d.Server("p").Set(func(b *hosttest.Behavior) { b.Tools = tools("t", "u") })
		e.d.Last("p").Notify("notifications/tools/list_changed")
		advance(host.DefaultCatalogDebounce)
		if c, _ := e.h.Catalog("p"); len(c.Tools) != 2 {
			t.Fatalf("%d tools", len(c.Tools))
		}
		if n := len(e.d.Sessions("p")); n != 2 {
			t.Fatalf("%d sessions; a refresh must not start another", n)
		}
	})
}

func TestCatalogDigestDistinguishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		// The same bytes split differently between items, or moved between lists, are
		// different catalogues.
		variants := []func(b *hosttest.Behavior){
			func(b *hosttest.Behavior) {
				b.Tools = []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`)}
			},
			func(b *hosttest.Behavior) {
				b.Tools = []json.RawMessage{json.RawMessage(`{"a":1}`)}
				b.Prompts = []json.RawMessage{json.RawMessage(`{"b":2}`)}
			},
			func(b *hosttest.Behavior) {
				b.Tools = nil
				b.Prompts = []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`)}
			},
		}
		seen := map[string]bool{}
		for i, v := range variants {
			name := fmt.Sprint("v", i)
			e.d.Server(name).Set(v)
			e.install(def(name))
			c, err := e.h.RefreshCatalog(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			if seen[c.Digest] {
				t.Fatalf("variant %d shares a digest", i)
			}
			seen[c.Digest] = true
		}
	})
}
