#!/usr/bin/env bash
# Side by side, interleaved rounds: the bench's echo MCP server served directly over
# Streamable HTTP; the same server (stdio) installed behind `toolgate serve`, its echo
# tool called through the gateway (authorized, audited); and, when SUPERGATEWAY_JS
# names supergateway's dist/index.js (an `npm install supergateway` in a scratch folder,
# never this repository), supergateway in front of it. Each target is started fresh per
# round; mcpload (BENCH_DIR, default ../shared/bench) drives it at each concurrency and
# reports calls/s, latency and the CPU of the target's process tree per call.
# docs/performance.md shows a run.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-../shared/bench}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-8s}
CONCS=${CONCS:-"1 8 32"}
NODE=${NODE:-$PWD/.cache/node22/node_modules/.bin/node}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$work/toolgate" ./cmd/toolgate
(cd "$BENCH_DIR" && go build -o "$work/" ./cmd/mcpload ./cmd/echo-server)
out="$work/runs.jsonl"

wait_http() { # url
	for _ in $(seq 200); do
		curl -s -o /dev/null -m 1 "$1" && return 0
		sleep 0.05
	done
	return 1
}

run_load() { # label url token tool pid
	for c in $CONCS; do
		"$work/mcpload" -url "$2" ${3:+-token "$3"} -c "$c" -d "$DURATION" -warmup 1s -tool "$4" \
			-args '{"message":"hello"}' -pid "$5" -label "$1 c=$c" | tee -a "$out"
	done
}

for round in $(seq "$ROUNDS"); do
	# direct
	"$work/echo-server" -http 127.0.0.1:18280 & pid=$!; pids+=("$pid")
	wait_http http://127.0.0.1:18280/mcp
	run_load "direct r$round" http://127.0.0.1:18280/mcp "" echo "$pid"
	kill "$pid"; wait "$pid" 2>/dev/null || true

	# toolgate serve with the echo server installed (stdio)
	data="$work/data-$round"; mkdir -m 700 "$data"
	printf '{"mcpServers":{"echo":{"command":"%s","args":["-stdio"]}}}' "$work/echo-server" >"$work/echo.json"
	TOOLGATE_HOME="$data" "$work/toolgate" install "$work/echo.json" --allow-implicit-invocation=true >/dev/null
	TOOLGATE_HOME="$data" "$work/toolgate" grant add --principal default --tool 'echo.*' --action execute >/dev/null
	TOOLGATE_HOME="$data" "$work/toolgate" serve --listen 127.0.0.1:18281 2>"$work/serve-$round.err" & pid=$!; pids+=("$pid")
	wait_http http://127.0.0.1:18281/healthz
	tok=$(cat "$data/owner-token")
	# Until the first catalogue is in, the tool is not published yet.
	for _ in $(seq 200); do
		curl -s -H "Authorization: Bearer $tok" http://127.0.0.1:18281/v1/tools | grep -q '"echo.echo"' && break
		sleep 0.05
	done
	run_load "toolgate serve r$round" http://127.0.0.1:18281/mcp "$tok" echo.echo "$pid"
	kill "$pid"; wait "$pid" 2>/dev/null || true

	if [ -n "${SUPERGATEWAY_JS:-}" ]; then
		"$NODE" "$SUPERGATEWAY_JS" --stdio "$work/echo-server -stdio" --outputTransport streamableHttp \
			--stateful --port 18282 --logLevel none & pid=$!; pids+=("$pid")
		for _ in $(seq 200); do
			curl -s -o /dev/null -m 1 -X POST http://127.0.0.1:18282/mcp && break
			sleep 0.05
		done
		run_load "supergateway r$round" http://127.0.0.1:18282/mcp "" echo "$pid"
		kill "$pid"; wait "$pid" 2>/dev/null || true
	fi
done
python3 - "$out" <<'PY'
import json, sys
print("| run | calls/s | p50 µs | p99 µs | target CPU µs/call | errors |")
print("| --- | --- | --- | --- | --- | --- |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['label']} | {r['calls_per_s']} | {r['p50_us']} | {r['p99_us']} | {r['tree_cpu_us_per_call']} | {r['errors']} |")
PY
