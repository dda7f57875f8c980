#!/usr/bin/env bash
# Side by side over stdio: `toolgate mcp` answering read_file and the official Node
# server-filesystem answering read_text_file for the same file, interleaved rounds, one
# request at a time (e2e/cmd/stdioload). Needs the npm peers (make deps). Prints the
# JSON lines and a Markdown table; docs/performance.md shows a run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8s}
NPM_DIR=${TOOLGATE_NPM_DIR:-$PWD/.cache/npm}
export PATH="$PWD/.cache/node22/node_modules/.bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/toolgate" ./cmd/toolgate
go build -o "$work/stdioload" ./e2e/cmd/stdioload
ws="$work/ws"
mkdir -p "$ws"
for i in $(seq 160); do echo "0123456789abcdef"; done >"$ws/a.txt"
data="$work/data"
mkdir -m 700 "$data"
fs="$NPM_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
out="$work/runs.jsonl"
for round in $(seq "$ROUNDS"); do
	TOOLGATE_HOME="$data" "$work/stdioload" -d "$DURATION" -warmup 1s -label "toolgate mcp read_file, round $round" \
		-tool toolgate_local_read_file -args '{"path":"a.txt"}' -- "$work/toolgate" mcp --workspace "$ws" | tee -a "$out"
	"$work/stdioload" -d "$DURATION" -warmup 1s -label "server-filesystem read_text_file, round $round" \
		-tool read_text_file -args "{\"path\":\"$ws/a.txt\"}" -- node "$fs" "$ws" | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, sys
print("| run | calls/s | p50 µs | p99 µs | server CPU µs/call | server RSS KiB |")
print("| --- | --- | --- | --- | --- | --- |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['label']} | {r['calls_per_s']} | {r['p50_us']} | {r['p99_us']} | {r['server_cpu_us_per_call']} | {r['server_rss_kb']} |")
PY
