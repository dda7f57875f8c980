package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
)

func init() { register(42, newAuditCmd) }

// auditPage is how many events one query reads, so a listing never holds the whole log
// in memory (app.Admin.VerifyAudit pages the same way).
const auditPage = 1000

// Bounds of --interval: fast enough to feel live, slow enough not to load the store.
const (
	minFollowInterval = 10 * time.Millisecond
	maxFollowInterval = time.Minute
)

// ExitChainBroken is the exit status of `audit --verify` when the chain is broken (other
// failures exit 1).
const ExitChainBroken = 2

type auditFlags struct {
	follow, verify, asJSON bool
	principal, tool        string
	decision, callID       string
	since, until           string
	anchor                 string
	limit                  int
	interval               time.Duration
}

func newAuditCmd(env *Env) *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit [--follow] [--verify] [filters] [--json]",
		Short: "List, follow or verify the audit trail",
		Long: `audit reads the audit trail: one event per decision the kernel made (allowed,
denied, failed, escalated), oldest first. Argument values appear only as HMACs.

  (default)   list the events the filters select, as a table or with --json as JSON lines
  --follow    after listing, keep printing new events as they are written (polling every
              --interval) until interrupted
  --verify    check the whole hash chain; prints the event count and head hash, or exits
              with status 2 naming the first broken seq (an edited, deleted, inserted or
              reordered event). Filters do not apply to --verify.
  --anchor    with --verify, SEQ:HASH from an earlier run's "head seq S hash H": the
              chain must still contain exactly that event, which also catches the
              newest events being removed or the whole chain being rewritten since.

--since and --until take an RFC 3339 time (2026-11-29T10:00:00Z), a date (2026-11-29,
UTC) or a duration meaning that long ago (90m, 24h). --since is inclusive, --until
exclusive.`,
		Example: `  toolgate audit --principal alice --decision denied --since 24h
  toolgate audit --follow --json | jq .
  toolgate audit --verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAudit(cmd.Context(), env, f) },
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new events until interrupted")
	fl.BoolVar(&f.verify, "verify", false, "verify the whole hash chain")
	fl.StringVar(&f.anchor, "anchor", "", "with --verify: a head SEQ:HASH printed by an earlier --verify that the chain must still pass through")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per line")
	fl.StringVar(&f.principal, "principal", "", "only events of this principal")
	fl.StringVar(&f.tool, "tool", "", "only events of this canonical tool id")
	fl.StringVar(&f.decision, "decision", "", "only events with this decision: allowed, denied, failed or escalated")
	fl.StringVar(&f.callID, "call-id", "", "only events of this call id")
	fl.StringVar(&f.since, "since", "", "only events at or after this time (RFC 3339, date, or duration ago)")
	fl.StringVar(&f.until, "until", "", "only events before this time (RFC 3339, date, or duration ago)")
	fl.IntVar(&f.limit, "limit", 0, "list at most this many events (0: all)")
	fl.DurationVar(&f.interval, "interval", time.Second, "how often --follow polls for new events (10ms to 1m)")
	return cmd
}

func runAudit(ctx context.Context, env *Env, f auditFlags) error {
	if f.verify && (f.follow || f.principal != "" || f.tool != "" || f.decision != "" || f.callID != "" ||
		f.since != "" || f.until != "" || f.limit != 0) {
		return errors.New("audit: --verify checks the whole chain and takes no filters, --limit or --follow")
	}
	if f.anchor != "" && !f.verify {
		return errors.New("audit: --anchor only applies to --verify")
	}
	var anchor *app.AuditAnchor
	if f.anchor != "" {
		a, err := parseAuditAnchor(f.anchor)
		if err != nil {
			return fmt.Errorf("audit: --anchor: %w", err)
		}
		anchor = &a
	}
	if f.limit < 0 {
		return fmt.Errorf("audit: --limit must not be negative, got %d", f.limit)
	}
	if f.follow && (f.interval < minFollowInterval || f.interval > maxFollowInterval) {
		return fmt.Errorf("audit: --interval %s is outside %s..%s", f.interval, minFollowInterval, maxFollowInterval)
	}
	filter := audit.Filter{Principal: f.principal, Tool: f.tool, Decision: f.decision, CallID: f.callID}
	switch f.decision {
	case "", string(audit.Allowed), string(audit.Denied), string(audit.Failed), string(audit.Escalated):
	default:
		return fmt.Errorf("audit: --decision %q: want allowed, denied, failed or escalated", f.decision)
	}
	now := time.Now()
	var err error
	if filter.Since, err = parseAuditTime(f.since, now); err != nil {
		return fmt.Errorf("audit: --since: %w", err)
	}
	if filter.Until, err = parseAuditTime(f.until, now); err != nil {
		return fmt.Errorf("audit: --until: %w", err)
	}

	s, err := openAdmin(ctx, env)
	if err != nil {
		return err
	}
	defer s.Close()
	if f.verify {
		return verifyAudit(ctx, env.Out, s, anchor)
	}

	var headAtStart int64
	if f.follow {
		if headAtStart, _, err = s.AuditHead(ctx); err != nil {
			return err
		}
	}
	p := &auditPrinter{w: env.Out, asJSON: f.asJSON}
	remaining := f.limit
	for {
		page := auditPage
		if f.limit > 0 && remaining < page {
			page = remaining
		}
		if f.limit > 0 && page == 0 {
			break
		}
		filter.Limit = page
		evs, err := s.Audit(ctx, filter)
		if err != nil {
			return err
		}
		if err := p.print(evs); err != nil {
			return err
		}
		if len(evs) > 0 {
			filter.AfterSeq = evs[len(evs)-1].Seq
		}
		remaining -= len(evs)
		if len(evs) < page {
			break
		}
	}
	if !f.follow {
		return p.finish()
	}
	// Follow from whichever is later: the last event printed, or the head when the
	// command started (so a filter that matched nothing, or a --limit that cut the
	// backlog, does not make every poll rescan old events).
	if headAtStart > filter.AfterSeq {
		filter.AfterSeq = headAtStart
	}
	filter.Limit = auditPage
	timer := time.NewTimer(f.interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		for {
			evs, err := s.Audit(ctx, filter)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if err := p.print(evs); err != nil {
				return err
			}
			if len(evs) > 0 {
				filter.AfterSeq = evs[len(evs)-1].Seq
			}
			if len(evs) < auditPage {
				break
			}
		}
		timer.Reset(f.interval)
	}
}

// parseAuditTime accepts RFC 3339, a UTC date, or a duration meaning that long before now.
func parseAuditTime(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %q is negative", v)
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date (YYYY-MM-DD) or a duration", v)
}

// parseAuditAnchor reads --anchor SEQ:HASH, a head an earlier --verify printed.
func parseAuditAnchor(v string) (app.AuditAnchor, error) {
	seqStr, hash, ok := strings.Cut(v, ":")
	seq, err := strconv.ParseInt(seqStr, 10, 64)
	if !ok || err != nil || seq < 1 {
		return app.AuditAnchor{}, fmt.Errorf("%q: want SEQ:HASH with SEQ ≥ 1", v)
	}
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return app.AuditAnchor{}, fmt.Errorf("%q: HASH must be 64 lowercase hex characters", v)
	}
	return app.AuditAnchor{Seq: seq, Hash: hash}, nil
}

// verifyAudit checks the whole chain (app.Admin.VerifyAudit) and prints its head; a
// broken chain exits ExitChainBroken.
func verifyAudit(ctx context.Context, w io.Writer, s *app.Admin, anchor *app.AuditAnchor) error {
	head, err := s.VerifyAudit(ctx, anchor)
	var broken *audit.ChainError
	if errors.As(err, &broken) {
		return &ExitError{Code: ExitChainBroken, Err: err}
	}
	if err != nil {
		return err
	}
	if head.Events == 0 {
		fmt.Fprintln(w, "audit chain ok: no events")
		return nil
	}
	fmt.Fprintf(w, "audit chain ok: %d events, head seq %d hash %s\n", head.Events, head.Seq, head.Hash)
	return nil
}

// auditPrinter prints events as JSON lines or as fixed-width table rows (fixed width
// so that rows printed by later polls of --follow line up with earlier ones).
type auditPrinter struct {
	w       io.Writer
	asJSON  bool
	started bool
}

const auditRowFormat = "%-6s  %-27s  %-16s  %-24s  %-7s  %-9s  %-22s  %s\n"

func (p *auditPrinter) print(evs []audit.Event) error {
	if p.asJSON {
		enc := json.NewEncoder(p.w)
		enc.SetEscapeHTML(false)
		for i := range evs {
			if err := enc.Encode(&evs[i]); err != nil {
				return fmt.Errorf("writing event %d: %w", evs[i].Seq, err)
			}
		}
		return nil
	}
	if !p.started && len(evs) > 0 {
		p.header()
	}
	for _, e := range evs {
		res := e.Resource
		if e.GrantID != "" {
			res = strings.TrimSpace(res + " (grant " + e.GrantID + ")")
		}
		_, err := fmt.Fprintf(p.w, auditRowFormat, fmt.Sprint(e.Seq), e.Time.Format(audit.TimeLayout), tableCell(e.Principal),
			tableCell(e.Tool), tableCell(e.Action), e.Decision, tableCell(e.Code), tableCell(res))
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *auditPrinter) header() {
	p.started = true
	fmt.Fprintf(p.w, auditRowFormat, "SEQ", "TIME", "PRINCIPAL", "TOOL", "ACTION", "DECISION", "CODE", "RESOURCE")
}

// finish prints a note when a table listing found nothing, so an empty result is not
// mistaken for a hang or an error.
func (p *auditPrinter) finish() error {
	if !p.asJSON && !p.started {
		_, err := fmt.Fprintln(p.w, "no audit events")
		return err
	}
	return nil
}
