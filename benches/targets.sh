# shellcheck shell=bash
# The issue-31 table of benches/load.sh (sourced after benches/lib.sh, never run): for each target
# the figures issue 31's goals are stated in, measured in load.sh's run beside its other tables
# (right after each target's rows there), each against nginx and against the lean floor:
#   CPU per request: the proxy's utime + stime over a closed-loop run on 32 connections
#   maximum throughput on those 32 connections (closed loop, T31_MAX_SECS, 5 s)
#   added p50 over direct at 20 and at 200 requests/s (open loop, 32 connections, T31_RATE_SECS
#     each, 8 s)
#   streams of 20 chunks (the fake's 10 ms pace, capped by max_tokens) at T31_STREAM_RPS (20) a
#     second for T31_STREAM_SECS (6 s): time to last byte, added p50 over direct
#   IDLE_CONNS (2,000) idle client connections: KB each, and whether RSS returns after they close
#     (lib.sh's idle_conns)
#   RSS after load.sh's 500 streams: at once (its main table's figure) and a second later
# All through `loadgen`, so LOADGEN=oha measures every load column with oha. About 2.5 minutes
# with the defaults for five targets (direct has no CPU, idle or RSS figures of its own).
T31_RATE_SECS=${T31_RATE_SECS:-8} T31_MAX_SECS=${T31_MAX_SECS:-5}
T31_STREAM_SECS=${T31_STREAM_SECS:-6} T31_STREAM_RPS=${T31_STREAM_RPS:-20} IDLE_CONNS=${IDLE_CONNS:-2000}

t31_row() { # name addr key: one target's row, appended to $work/t31.jsonl
  local name=$1 addr=$2 key=$3 auth=() url later=0 r20 r200 max stream idle=null
  [ -n "$key" ] && auth=(--header "Authorization: Bearer $key")
  url="http://$addr/v1/chat/completions"
  # First, before any other load: the memory a second after load.sh's 500 streams.
  if [ "$name" != direct ]; then sleep 1; later=$(rss_of "$name"); fi
  echo "== issue-31 row $name" >&2
  r20=$(loadgen rate "$url" "$T31_RATE_SECS" 32 20 --model bench "${auth[@]}")
  r200=$(loadgen rate "$url" "$T31_RATE_SECS" 32 200 --model bench "${auth[@]}")
  # The rate argument is not used by a closed loop.
  max=$(measure "$name" loadgen max "$url" "$T31_MAX_SECS" 32 1000 --model bench "${auth[@]}")
  stream=$(loadgen rate "$url" "$T31_STREAM_SECS" 32 "$T31_STREAM_RPS" --model bench --stream --max-tokens 20 "${auth[@]}")
  if [ "$name" != direct ]; then idle=$(idle_conns "$name" "$addr" "$IDLE_CONNS"); fi
  echo "{\"name\":\"$name\",\"r20\":$r20,\"r200\":$r200,\"max\":$max,\"stream\":$stream,\"idle\":$idle,\"rss_later_kb\":${later:-0}}" >> "$work/t31.jsonl"
}

t31_table() { # load.sh's results.jsonl (its RSS after the 500 streams)
  python3 - "$work/t31.jsonl" "$1" "$IDLE_CONNS" "$T31_STREAM_RPS" "$STREAMS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rss_now = {r["name"]: r["rss_kb"] for r in map(json.loads, open(sys.argv[2]))}
idle_n, stream_rps, streams = int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
by = {r["name"]: r for r in rows}
d, n = by["direct"], by["nginx"]
lean = by.get("lean", n)
def cpu(r):
    return r["max"]["cpu_us"] / max(r["max"].get("requests", 0), 1)
def added(r, k):
    return r[k]["p50_us"] - d[k]["p50_us"]
def ratio(a, b):
    return f"{a / b:.2f}×" if b > 0 else "–"
def both(a, fa, fmt):
    # A figure with its ratios to nginx's and to the lean floor's (fa: the figure of a row).
    return f"{fmt.format(a)} ({ratio(a, fa(n))}, {ratio(a, fa(lean))})"
def lat(r, k):
    if r is d:
        return f'itself: {r[k]["p50_us"]}'
    return both(added(r, k), lambda x: added(x, k), "{}")
print()
print("issue-31 table (every ratio: × nginx's, × the lean floor's)")
print()
print(f"| target | CPU µs/req @32 conns | max rps @32 conns | added p50 µs @20 rps | added p50 µs @200 rps | stream of 20 chunks @{stream_rps}/s: TTLB p50 ms, added p50 µs | {idle_n:,} idle conns: KB each, MB before → open → after close (returned) | RSS after {streams:,} streams MB (at once / 1 s later) | errors |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    name, s, i = r["name"], r["stream"], r["idle"]
    c = "–" if r is d else both(cpu(r), cpu, "{:.1f}")
    rps = both(r["max"]["rps"], lambda x: x["max"]["rps"], "{:.0f}")
    st = f'{s["p50_us"] / 1000:.1f}, ' + ("itself" if r is d else both(added(r, "stream"), lambda x: added(x, "stream"), "{}"))
    if i:
        short = f', {i["opened"]} opened' if i["opened"] < i["conns"] else ""
        idle = f'{i["kb_each"]:.1f}, {i["before_kb"] / 1024:.1f} → {i["open_kb"] / 1024:.1f} → {i["after_kb"] / 1024:.1f} ({"yes" if i["returned"] else "no"}{short})'
    else:
        idle = "–"
    mem = "–" if r is d else f'{rss_now.get(name, 0) / 1024:.1f} / {r["rss_later_kb"] / 1024:.1f}'
    errors = sum(r[k]["errors"] for k in ("r20", "r200", "max", "stream"))
    print(f'| {name} | {c} | {rps} | {lat(r, "r20")} | {lat(r, "r200")} | {st} | {idle} | {mem} | {errors} |')
print()
print("targets: CPU/req ≤ 2× nginx's; max rps @32 ≥ 0.7× nginx's; added p50 at 20 and at 200 rps ≤ 1.5× nginx's; "
      "stream TTLB added p50 ≤ 1.5× nginx's; idle connections ≤ 10 KB each and returned after they close; "
      "RSS after 500 streams (1 s later) ≤ 48 MB")
def goals(r):
    def le(a, b, k):
        return b > 0 and a <= k * b
    i = r["idle"] or {}
    return [
        ("CPU", le(cpu(r), cpu(n), 2), f"{ratio(cpu(r), cpu(n))}"),
        ("max rps", r["max"]["rps"] >= 0.7 * n["max"]["rps"], ratio(r["max"]["rps"], n["max"]["rps"])),
        ("added p50 @20", le(added(r, "r20"), added(n, "r20"), 1.5), ratio(added(r, "r20"), added(n, "r20"))),
        ("added p50 @200", le(added(r, "r200"), added(n, "r200"), 1.5), ratio(added(r, "r200"), added(n, "r200"))),
        ("stream TTLB", le(added(r, "stream"), added(n, "stream"), 1.5), ratio(added(r, "stream"), added(n, "stream"))),
        ("idle", i.get("kb_each", 1e9) <= 10 and bool(i.get("returned")), f'{i.get("kb_each", 0):.1f} KB, {"returned" if i.get("returned") else "kept"}'),
        ("RSS", 0 < r["rss_later_kb"] <= 48 * 1024, f'{r["rss_later_kb"] / 1024:.1f} MB'),
    ]
for r in rows:
    if r is d or r is n:
        continue
    g = goals(r)
    missed = [f"{k} ({v})" for k, ok, v in g if not ok]
    print(f'{r["name"]}: {len(g) - len(missed)} of {len(g)} goals met' + (f"; missed: {', '.join(missed)}" if missed else ""))
PY
}
