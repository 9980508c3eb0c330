#!/usr/bin/env bash
# make test's runner: every package's tests, with the end-to-end package's
# split into E2E_SHARDS processes (default 2, as make test's; 1 is
# `go test ./...`) that run beside the others.
#
# Why: e2e is one package of ~150 tests that run one after another, most of
# their time spent waiting on sandboxes (a window, a log line, an episode's
# timeout), and it outlasted every other package by ~20 minutes, with the
# machine's CPU partly idle. Each shard is its own `go test` process with
# its own TestMain (its own index of runs), so tests that set environment
# variables stay as they are; two shards are two users of agentbox on one
# machine, which agentbox must support anyway.
#
# The tests are dealt to the shards by their times in
# e2e/testdata/durations.txt, the longest first, each to the shard with the
# least so far, so that the shards end near each other.
# `scripts/test.sh --durations LOG` rewrites that file from the output of `go test -v ./e2e` or of
# `scripts/test.sh -v` (the "--- PASS: TestName (12.34s)" lines).
#
# Usage: scripts/test.sh [go test flags…]   (GO, E2E_SHARDS, TEST_TIMEOUT)
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
shards=${E2E_SHARDS:-2}
timeout=${TEST_TIMEOUT:-45m}
durations=e2e/testdata/durations.txt

if [[ ${1:-} == --durations ]]; then
	log=${2:?usage: scripts/test.sh --durations LOG}
	# A log of this script's: the e2e shards' lines alone.
	prefix='^'
	grep -q '^\[e2e [0-9]*/[0-9]*\] ' "$log" && prefix='^\[e2e [0-9]+/[0-9]+\] '
	grep -E "$prefix"'--- (PASS|FAIL): Test[^/ ]+ \(' "$log" |
		sed -E 's/^.*--- (PASS|FAIL): (Test[^ ]+) \(([0-9.]+)s\).*/\3 \2/' |
		sort -rn | awk '{print $2, $1}' >"$durations.new" && mv "$durations.new" "$durations"
	echo "scripts/test.sh: wrote $durations ($(wc -l <"$durations") tests)"
	exit 0
fi

case $shards in
'' | *[!0-9]* | 0)
	echo "scripts/test.sh: E2E_SHARDS=$shards: want a number of shards, 1 or more" >&2
	exit 2
	;;
esac

# One shard: every package in one go test, exactly as `go test ./...`.
if [[ $shards == 1 ]]; then
	exec $GO test -count=1 -timeout "$timeout" "$@" ./...
fi

pkgs=$($GO list ./... | grep -v '/e2e$') || {
	echo "scripts/test.sh: go list ./... failed" >&2
	exit 1
}
# The e2e tests by name (compiling the package once; the shards reuse it).
all=$($GO test -list '^Test' ./e2e | grep '^Test') || {
	echo "scripts/test.sh: listing the e2e tests failed (does ./e2e compile?)" >&2
	exit 1
}
# Deal the tests, the longest first, each to the shard with the least
# time so far (a test durations.txt does not know counts as 10 s); the
# output is one line per shard, its tests joined by "|".
dealt=$({
	[[ -f $durations ]] && cat "$durations"
	echo "$all" | awk '{print $1, 10}'
} | awk -v known="$(echo "$all" | tr '\n' ' ')" -v shards="$shards" '
	BEGIN { n = split(known, k, " "); for (i = 1; i <= n; i++) ok[k[i]] = 1 }
	ok[$1] && !seen[$1]++ {
		best = 0
		for (s = 1; s < shards; s++) if (load[s] < load[best]) best = s
		load[best] += $2
		list[best] = list[best] (list[best] == "" ? "" : "|") $1
	}
	END { for (s = 0; s < shards; s++) print list[s] }')
mapfile -t shard_tests <<<"$dealt"

pids=()
names=()
# shellcheck disable=SC2086 # pkgs is a list of words
$GO test -count=1 -timeout "$timeout" "$@" $pkgs &
pids+=($!)
names+=("the packages other than e2e")
for ((s = 0; s < shards; s++)); do
	[[ -n ${shard_tests[s]:-} ]] || continue
	(
		$GO test -count=1 -timeout "$timeout" "$@" -run "^(${shard_tests[s]})\$" ./e2e 2>&1 |
			sed -u "s|^|[e2e $((s + 1))/$shards] |"
	) &
	pids+=($!)
	names+=("e2e shard $((s + 1)) of $shards")
done

rc=0
for k in "${!pids[@]}"; do
	if ! wait "${pids[k]}"; then
		echo "scripts/test.sh: FAILED: ${names[k]}" >&2
		rc=1
	fi
done
exit $rc
