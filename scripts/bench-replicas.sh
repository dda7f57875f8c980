#!/usr/bin/env bash
# The replica figures of docs/deployment.md ("Measured") in one run: calls per second
# through the in-test round-robin proxy to 1, 2 and 3 `toolgate serve` replicas on one
# PostgreSQL (POST /v1/tools/invoke, and tools/call over legacy MCP sessions spread
# over every replica), and the time a grant change committed through one replica takes
# to reach another's kernel. Each benchmark package starts its own throw-away
# PostgreSQL (internal/testenv; scripts/deps.sh installs the postgresql package).
# ROUNDS (default 2) repeats each benchmark; BENCHTIME (default 3s) is per run.
# Prints the raw benchmark lines, then a Markdown table (min–max over the rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
BENCHTIME=${BENCHTIME:-3s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'ReplicasInvoke|ReplicasSessionCalls' -benchtime "$BENCHTIME" -count "$ROUNDS" \
	./internal/app/daemon/ | tee -a "$out"
go test -run '^$' -bench 'GrantChange' -count "$((ROUNDS + 1))" ./internal/app/ | tee -a "$out"
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$out" <<'PY'
import re, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"Benchmark(\S+?)(?:-\d+)?\s+\d+\s+.*?([\d.]+) (calls/s|µs/propagation)", line)
    if m:
        runs.setdefault((m.group(1), m.group(3)), []).append(float(m.group(2)))
def span(vs, fmt):
    lo, hi = min(vs), max(vs)
    return fmt.format(lo) if lo == hi else (fmt + "–" + fmt).format(lo, hi)
print()
print("| What | 1 replica | 2 replicas | 3 replicas |")
print("| --- | --- | --- | --- |")
for name, label in (("ReplicasInvoke", "calls/s, POST /v1/tools/invoke"), ("ReplicasSessionCalls", "calls/s, tools/call over MCP sessions")):
    cells = [span(runs[(f"{name}/replicas={n}", "calls/s")], "{:,.0f}") if (f"{name}/replicas={n}", "calls/s") in runs else "–" for n in (1, 2, 3)]
    print(f"| {label} | " + " | ".join(cells) + " |")
g = [v for (k, u), vs in runs.items() if k.startswith("GrantChange") for v in vs]
if g:
    print()
    print(f"grant change reaching another replica's kernel: {span(g, '{:,.0f}')} µs")
PY
