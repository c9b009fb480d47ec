#!/usr/bin/env bash
# What each part of a metered MCP tools/call costs, measured by taking it out: `bash
# benches/ablate.sh [ROUNDS]` (`ABLATE_PATH=chat`: a chat completion's instead, JSON, in front of
# the fake provider; the ablations marked "(tools/call only)" on their first line are left out). Each `benches/ablations/*.diff` is applied alone to HEAD in a
# scratch worktree and built (into target/ablate, shared by the variants: the first build takes
# as long as a clean one, later ones a minute or two); then nginx, the lean floor, this
# checkout's build and each variant serve tools/call in front of one fake tool server, interleaved
# (a round measures each once, in that order): maximum throughput on 64 connections for 5 s and
# the proxy's CPU per call. Prints the medians, each against nginx's. The variants are
# measurements, never builds to ship: they answer without the part they drop.
# `ABLATIONS=DIR` takes the diffs from DIR instead: a candidate change measured the same way
# (an empty DIR: this checkout's build alone, beside nginx and the lean floor). `BINS="NAME=PATH
# ..."` adds builds already made (e.g. `plain=target/release/tollgate` beside `PGO=1`'s).
# (The patches are against the code they name; one that no longer applies stops the run with
# git's message: rewrite it against the new code.)
set -euo pipefail
ROUNDS=${1:-3}
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup
# The scratch worktrees live in $work, which the cleanup removes: forget them there too.
trap 'bench_cleanup; git worktree prune' EXIT
start_fakes 50 10
start_nginx
start_floor

names=(head) bins=("$root/$TOLLGATE")
# An empty ABLATIONS directory measures this checkout's build alone beside the floors.
shopt -s nullglob
for diff in "${ABLATIONS:-benches/ablations}"/*.diff; do
  name=$(basename "$diff" .diff)
  if [ "${ABLATE_PATH:-tools}" = chat ] && head -1 "$diff" | grep -q '(tools/call only)'; then
    continue
  fi
  tree="$work/src-$name"
  git worktree add -q --detach "$tree" HEAD
  git -C "$tree" apply "$(realpath "$diff")"
  echo "building the variant $name ..." >&2
  if ! (cd "$tree" && CARGO_TARGET_DIR="$root/target/ablate" cargo build --release -q --bin tollgate) >"$work/build-$name.log" 2>&1; then
    tail -30 "$work/build-$name.log" >&2
    exit 1
  fi
  cp "$root/target/ablate/release/tollgate" "$work/bin-$name"
  git worktree remove --force "$tree"
  names+=("$name") bins+=("$work/bin-$name")
done

for nb in ${BINS:-}; do
  names+=("${nb%%=*}") bins+=("$(realpath "${nb#*=}")")
done

# Each build on its own port (above the ones lib.sh names), its own SQLite file and account,
# the fake tool server registered at 1 credit a call as in load.sh.
declare -A pid key addr
for i in "${!names[@]}"; do
  n=${names[$i]} a=127.0.0.1:$((19111 + i))
  TOLLGATE=${bins[$i]} start_tollgate "tg$i" "$a" "sqlite://$work/$n.db" ""
  eval "pid[$n]=\$tg${i}_pid key[$n]=\$tg${i}_key"
  addr[$n]=$a
  register_bench_tools "$a" "${key[$n]}"
done
# measure's CPU column reads the pids of these names.
proxy_pids() {
  case $1 in
    nginx) ps -o pid= --ppid "$(cat "$work/nginx.pid")" | tr '\n' ' ' ;;
    lean) if [ "${ABLATE_PATH:-tools}" = chat ]; then echo "$lean_pid"; else echo "$lean_tools_pid"; fi ;;
    *) echo "${pid[$1]}" ;;
  esac
}
call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"TOOL","arguments":{"text":"hi"}}}'
for round in $(seq 1 "$ROUNDS"); do
  for n in nginx lean "${names[@]}"; do
    if [ "${ABLATE_PATH:-tools}" = chat ]; then
      shape=(--model bench)
      case $n in
        nginx) url=http://$NGX/v1/chat/completions auth=() ;;
        lean) url=http://$LEAN/v1/chat/completions auth=() ;;
        *) url=http://${addr[$n]}/v1/chat/completions auth=(--header "Authorization: Bearer ${key[$n]}") ;;
      esac
    else
      case $n in
        nginx) url=http://$NGX_TOOLS/mcp tool=echo auth=() ;;
        lean) url=http://$LEAN_TOOLS/mcp tool=echo auth=() ;;
        *) url=http://${addr[$n]}/mcp tool=bench-tools__echo auth=(--header "Authorization: Bearer ${key[$n]}") ;;
      esac
      shape=(--body "${call/TOOL/$tool}")
    fi
    echo "== round $round: $n" >&2
    m=$(measure "$n" "$BENCH" load --url "$url" --mode max --secs 5 --conns 64 "${shape[@]}" "${auth[@]}")
    echo "{\"name\":\"$n\",\"round\":$round,\"max\":$m}"
  done
done > "$work/ablate.jsonl"
what=tools/call
[ "${ABLATE_PATH:-tools}" = chat ] && what="chat (JSON)"
python3 - "$work/ablate.jsonl" "$what" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = list(dict.fromkeys(r["name"] for r in rows))
def of(n, f):
    return [f(r["max"]) for r in rows if r["name"] == n]
nginx = statistics.median(of("nginx", lambda m: m["rps"]))
# Each round's rate against nginx's in the same round: the machine's drift over the run cancels.
nginx_by_round = {r["round"]: r["max"]["rps"] for r in rows if r["name"] == "nginx"}
def per_round(n):
    return [r["max"]["rps"] / nginx_by_round[r["round"]] for r in rows if r["name"] == n and nginx_by_round.get(r["round"])]
print(f"| {sys.argv[2]} through | max rps @64 conns: median (min–max) | × nginx | × nginx, round by round: median (min–max) | proxy CPU µs a request: median | errors |")
print("|---|---|---|---|---|---|")
for n in names:
    rps = of(n, lambda m: m["rps"])
    cpu = of(n, lambda m: m["cpu_us"] / max(m["requests"], 1))
    errors = sum(of(n, lambda m: m["errors"]))
    pr = per_round(n)
    print(f"| {n} | {statistics.median(rps):.0f} ({min(rps):.0f}–{max(rps):.0f}) | {statistics.median(rps) / nginx:.2f} | {statistics.median(pr):.2f} ({min(pr):.2f}–{max(pr):.2f}) | {statistics.median(cpu):.1f} | {errors} |")
PY
