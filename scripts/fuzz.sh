#!/usr/bin/env bash
# Runs every native Go fuzz target in the repository for FUZZTIME each (default 2s),
# one at a time with one worker, and fails if any finds a failing input (which the
# fuzzer saves under the package's testdata/fuzz/, to be committed with the fix).
# `make test` runs the short form; a long round is `FUZZTIME=150s scripts/fuzz.sh`
# (docs/reliability.md, "Fuzzing"). A summary line per target goes to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-2s}
failed=0
mapfile -t files < <(git grep -l -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' -- '*_test.go')
for file in "${files[@]}"; do
	pkg=./$(dirname "$file")
	for fn in $(grep -o -E '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
		out=$(go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" -parallel 1 "$pkg" 2>&1)
		rc=$?
		execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2)
		if [ $rc -ne 0 ]; then
			# A worker that misses the coordinator's deadline on an overloaded machine is
			# not a finding: it leaves no input behind. Retry once before failing.
			if ! grep -q 'Failing input written to' <<<"$out"; then
				out=$(go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" -parallel 1 "$pkg" 2>&1)
				rc=$?
				execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2)
			fi
		fi
		if [ $rc -ne 0 ] && ! grep -q 'Failing input written to' <<<"$out" && grep -q 'context deadline exceeded' <<<"$out"; then
			# The fuzzer's own deadline reached a worker mid-input on a loaded machine:
			# the run ended, nothing was found (a finding always leaves its input).
			echo "ok   $pkg $fn execs=${execs:-?} (the fuzzer's deadline ended a worker mid-input)"
			continue
		fi
		if [ $rc -ne 0 ]; then
			failed=1
			echo "FAIL $pkg $fn"
			echo "$out" | tail -30
		else
			echo "ok   $pkg $fn execs=${execs:-?}"
		fi
	done
done
exit $failed
