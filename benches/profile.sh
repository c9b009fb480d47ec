#!/usr/bin/env bash
# Where the gateway's CPU time goes under load (README, Performance): the fake provider and
# Tollgate on its embedded default (SQLite + in-process counters, auth, limits and metering on),
# 64 connections at full speed for 10 s while `perf record` samples the gateway (cpu-clock, so it
# works without hardware counters), then the top symbols by self time and a grouping by
# subsystem, and the share of each thread (the proxy threads, SQLite's worker threads, the
# background services). `PROFILE_PATH=tools` profiles a metered MCP tools/call in front of the
# fake tool server instead of chat. Needs linux-perf (installed from Debian when missing).
# Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
command -v perf >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
# The same setup as load.sh (benches/lib.sh).
# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup no-nginx
start_fakes 50 10
start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
tg=$tg_sqlite_pid key=$tg_sqlite_key TG=$TG1
url=http://$TG/v1/chat/completions shape=(--model bench)
if [ "${PROFILE_PATH:-chat}" = tools ]; then
  # The fake tool server at 1 credit a call, as in load.sh.
  register_bench_tools "$TG" "$key"
  url=http://$TG/mcp
  shape=(--body '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench-tools__echo","arguments":{"text":"hi"}}}')
fi
perf record -q -e cpu-clock -F 2999 -g -p "$tg" -o "$work/perf.data" -- sleep "$SECS" 2>/dev/null &
rec=$!
"$BENCH" load --url "$url" --mode max --secs "$SECS" --conns 64 "${shape[@]}" --header "Authorization: Bearer $key"
wait "$rec" || true
echo
perf report -i "$work/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null \
  | grep -E '^ +[0-9.]+%' | sed -E 's/[[:space:]]+(-[[:space:]]+)*$//' > "$work/report.txt"
echo "by thread (% of the gateway's samples; numbered threads of one kind summed):"
perf report -i "$work/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null \
  | grep -E '^ +[0-9.]+%' | sed -E 's/[0-9]+$//' \
  | awk '{ pct[$2] += $1 } END { for (c in pct) printf "  %5.1f%%  %s\n", pct[c], c }' | sort -rn
echo
echo "top symbols by self time (% of the gateway's samples):"
head -30 "$work/report.txt"
echo
echo "by subsystem (self time, grouped by symbol name):"
python3 - "$work/report.txt" <<'PY'
import re, sys
groups = [
    ("kernel: sockets, syscalls, scheduling", r"\[k\]"),
    ("allocator (malloc/free/memcpy)", r"malloc|free|realloc|calloc|memcpy|memmove|memset|_int_|unlink_chunk|mi_"),
    ("JSON (serde_json)", r"serde_json|serde::"),
    ("SQLite", r"sqlite3|sqlx_sqlite"),
    ("HTTP (httparse, pingora)", r"httparse|pingora|http::"),
    ("tokio runtime and locks", r"tokio|parking_lot|futex|mutex|Mutex"),
    ("filters (SSE, validation, tokens)", r"tollgate_filters"),
    ("gateway (tollgate)", r"tollgate"),
]
tot = {g: 0.0 for g, _ in groups}
other = 0.0
for line in open(sys.argv[1]):
    m = re.match(r"\s+([0-9.]+)%\s+(.*)", line)
    if not m:
        continue
    pct, sym = float(m.group(1)), m.group(2)
    for g, pat in groups:
        if re.search(pat, sym):
            tot[g] += pct
            break
    else:
        other += pct
for g, _ in groups:
    print(f"  {tot[g]:5.1f}%  {g}")
print(f"  {other:5.1f}%  other")
PY
