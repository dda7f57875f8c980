#!/usr/bin/env bash
# Measures `toolgate serve` answering tools/call server.version at each audit
# durability level, interleaved rounds, with the load generator of an MCP bench
# checkout (BENCH_DIR, default ../shared/bench: its cmd/mcpload). Prints one JSON line
# per run (mcpload's report) and a Markdown table. docs/performance.md shows a run.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-../shared/bench}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8s}
PORT=${PORT:-18190}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/toolgate" ./cmd/toolgate
(cd "$BENCH_DIR" && go build -o "$work/mcpload" ./cmd/mcpload)
out="$work/runs.jsonl"
for round in $(seq "$ROUNDS"); do
	for level in process power; do
		d="$work/data-$level-$round"
		mkdir -m 700 "$d"
		TOOLGATE_HOME="$d" "$work/toolgate" serve --listen "127.0.0.1:$PORT" --audit-durability "$level" 2>"$d.err" &
		pid=$!
		for _ in $(seq 100); do grep -q listening "$d.err" 2>/dev/null && break; sleep 0.1; done
		for c in 1 8; do
			"$work/mcpload" -url "http://127.0.0.1:$PORT/mcp" -token "$(cat "$d/owner-token")" -c "$c" \
				-d "$DURATION" -warmup 1s -tool server.version -args '{}' -pid "$pid" -label "$level c=$c round $round" | tee -a "$out"
		done
		kill "$pid"
		wait "$pid" || true
	done
done
python3 - "$out" <<'PY'
import json, sys
print("| run | calls/s | p50 µs | p99 µs | toolgate CPU µs/call | host busy % |")
print("| --- | --- | --- | --- | --- | --- |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['label']} | {r['calls_per_s']} | {r['p50_us']} | {r['p99_us']} | {r['tree_cpu_us_per_call']} | {r['host_busy_pct']} |")
PY
