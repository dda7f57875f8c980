#!/usr/bin/env bash
# Side by side, interleaved rounds: the bench's echo MCP server served directly over
# Streamable HTTP; the same server (stdio) installed behind `toolgate serve`, its echo
# tool called through the gateway (authorized, audited); and, when SUPERGATEWAY_JS
# names supergateway's dist/index.js (an `npm install supergateway` in a scratch folder,
# never this repository), supergateway in front of it. Each target is started fresh per
# round; mcpload (BENCH_DIR, default ../shared/bench) drives it at each concurrency and
# reports calls/s, latency and the CPU of the target's process tree per call, and
# the CPU of the target's own process per call (toolgate without its echo child).
# BASE_REF (a commit) adds `toolgate serve` built from that commit (git archive into
# the scratch folder) as one more target of the same rounds: before and after in one run.
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
builds=("toolgate serve=$work/toolgate")
if [ -n "${BASE_REF:-}" ]; then
	mkdir "$work/base"
	git archive "$BASE_REF" | tar -x -C "$work/base"
	(cd "$work/base" && CGO_ENABLED=0 go build -o "$work/toolgate-base" ./cmd/toolgate)
	builds+=("toolgate serve $BASE_REF=$work/toolgate-base")
fi
(cd "$BENCH_DIR" && go build -o "$work/" ./cmd/mcpload ./cmd/echo-server)
out="$work/runs.jsonl"

wait_http() { # url
	for _ in $(seq 200); do
		curl -s -o /dev/null -m 1 "$1" && return 0
		sleep 0.05
	done
	return 1
}

ticks() { # pid...: utime+stime of those processes, in clock ticks
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		set -- $(sed 's/.*) //' "/proc/$p/stat")
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}

run_load() { # label url token tool pid
	for c in $CONCS; do
		local kids own0 tree0
		kids=$(pgrep -P "$5" | tr '\n' ' ' || true)
		own0=$(ticks "$5"); tree0=$(ticks "$5" $kids)
		"$work/mcpload" -url "$2" ${3:+-token "$3"} -c "$c" -d "$DURATION" -warmup 1s -tool "$4" \
			-args '{"message":"hello"}' -pid "$5" -label "$1 c=$c" >"$work/one.json"
		# The target's own share of its tree's CPU over the run (warm-up included on
		# both sides), applied to mcpload's per-call figure.
		python3 - "$work/one.json" $(($(ticks "$5") - own0)) $(($(ticks "$5" $kids) - tree0)) <<'PY' | tee -a "$out"
import json, sys
r = json.load(open(sys.argv[1]))
own, tree = int(sys.argv[2]), int(sys.argv[3])
r["own_cpu_us_per_call"] = round(r["tree_cpu_us_per_call"] * own / tree, 1) if tree else None
print(json.dumps(r))
PY
	done
}

for round in $(seq "$ROUNDS"); do
	# direct
	"$work/echo-server" -http 127.0.0.1:18280 & pid=$!; pids+=("$pid")
	wait_http http://127.0.0.1:18280/mcp
	run_load "direct r$round" http://127.0.0.1:18280/mcp "" echo "$pid"
	kill "$pid"; wait "$pid" 2>/dev/null || true

	# toolgate serve with the echo server installed (stdio), for each build
	for b in "${builds[@]}"; do
		name=${b%%=*} bin=${b#*=}
		data="$work/data-$round-${bin##*/}"; mkdir -m 700 "$data"
		printf '{"mcpServers":{"echo":{"command":"%s","args":["-stdio"]}}}' "$work/echo-server" >"$work/echo.json"
		TOOLGATE_HOME="$data" "$bin" install "$work/echo.json" --allow-implicit-invocation=true >/dev/null
		TOOLGATE_HOME="$data" "$bin" grant add --principal default --tool 'echo.*' --action execute >/dev/null
		TOOLGATE_HOME="$data" "$bin" serve --listen 127.0.0.1:18281 2>"$work/serve-$round.err" & pid=$!; pids+=("$pid")
		wait_http http://127.0.0.1:18281/healthz
		tok=$(cat "$data/owner-token")
		# Until the first catalogue is in, the tool is not published yet.
		for _ in $(seq 200); do
			curl -s -H "Authorization: Bearer $tok" http://127.0.0.1:18281/v1/tools | grep -q '"echo.echo"' && break
			sleep 0.05
		done
		run_load "$name r$round" http://127.0.0.1:18281/mcp "$tok" echo.echo "$pid"
		kill "$pid"; wait "$pid" 2>/dev/null || true
	done

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
print("| run | calls/s | p50 µs | p99 µs | tree CPU µs/call | own CPU µs/call | host busy % | errors |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['label']} | {r['calls_per_s']} | {r['p50_us']} | {r['p99_us']} | {r['tree_cpu_us_per_call']} | {r['own_cpu_us_per_call']} | {r['host_busy_pct']} | {r['errors']} |")
PY
