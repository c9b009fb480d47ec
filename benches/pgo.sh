#!/usr/bin/env bash
# A profile-guided release build of the gateway and the lean floor: `bash benches/pgo.sh`.
# 1. Both are built instrumented (`-Cprofile-generate`, into target/pgo-gen);
# 2. they serve the benches' workload through the local fakes (chat JSON and streams, the
#    Anthropic-kind provider, embeddings, the Responses, Messages and Gemini doors, MCP
#    tools/call; on SQLite, and on Postgres + Redis when they answer), PGO_SECS seconds each;
# 3. the counts they write at exit are merged with rustup's `llvm-profdata` (component
#    llvm-tools, added here if missing) into target/pgo/merged.profdata;
# 4. both are built again with it (`-Cprofile-use`, into target/pgo).
# The bench scripts measure that build with PGO=1 (benches/lib.sh); tollgate-bench (the fakes
# and the load generator) stays the plain release build, so every target is measured against
# the same fakes. Only what the host triple builds is instrumented (`--target`): build scripts
# and proc macros are not, so only the two servers write counts.
# Why: the gateway's path is flat (no function above ~2 % of a call) and long; laying out the hot
# code together and inlining by measured counts is what a compiler can do that a hand edit
# cannot. Takes two release builds (~15 min each from scratch on two cores) and ~1 min of load.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PGO_SECS=${PGO_SECS:-6}
host=$(rustc -vV | sed -n 's/^host: //p')
gen_dir=$root/target/pgo-gen use_dir=$root/target/pgo
profiles=$gen_dir/profiles
merged=$use_dir/merged.profdata

rustup component list --installed 2>/dev/null | grep -q '^llvm-tools' || rustup component add llvm-tools >&2
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
[ -x "$profdata" ] || { echo "no llvm-profdata at $profdata" >&2; exit 1; }

servers=(-p tollgate --bin tollgate --example lean_floor)
echo "building the instrumented servers (target/pgo-gen) ..." >&2
CARGO_TARGET_DIR=$gen_dir RUSTFLAGS="-Cprofile-generate=$profiles" \
  cargo build --release --target "$host" "${servers[@]}" 2>&1 | tail -1
rm -rf "$profiles"
mkdir -p "$profiles" "$use_dir"

# The plain tollgate-bench (fakes, load generator); lib.sh's paths pointed at the instrumented
# servers. Each process writes its counts to its own file (%p) when it exits.
# shellcheck source=benches/lib.sh
. benches/lib.sh
bench_setup no-nginx
TOLLGATE=$gen_dir/$host/release/tollgate LEAN_FLOOR=$gen_dir/$host/release/examples/lean_floor
export LLVM_PROFILE_FILE=$profiles/%p-%m.profraw
start_fakes 50 1
start_floor
start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
targets=("$TG1|$tg_sqlite_key")
if psql -h 127.0.0.1 -U postgres -qc 'SELECT 1' >/dev/null 2>&1 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  PGDB="tollgate_pgo_$$"
  psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $PGDB" >/dev/null
  start_tollgate tg_pg "$TG2" "postgres://postgres@127.0.0.1:5432/$PGDB" "redis://127.0.0.1:6379/"
  targets+=("$TG2|$tg_pg_key")
else
  echo "pgo: Postgres or Redis not answering: trained on SQLite only" >&2
fi

train() { # url [load options]
  local url=$1; shift
  "$BENCH" load --url "$url" --mode max --secs "$PGO_SECS" --conns 32 --rps 1000 "$@" >/dev/null
}
say='Say something short.'
call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench-tools__echo","arguments":{"text":"hi"}}}'
for t in "${targets[@]}"; do
  IFS='|' read -r addr key <<<"$t"
  auth=(--header "Authorization: Bearer $key")
  register_bench_tools "$addr" "$key"
  echo "pgo: training on $addr ..." >&2
  train "http://$addr/mcp" --body "$call" "${auth[@]}"
  train "http://$addr/v1/chat/completions" --model bench "${auth[@]}"
  train "http://$addr/v1/chat/completions" --model bench --stream --max-tokens 20 "${auth[@]}"
  train "http://$addr/v1/chat/completions" --model bench-claude "${auth[@]}"
  train "http://$addr/v1/embeddings" --body '{"model":"bench-emb","input":["one","two","three"]}' "${auth[@]}"
  train "http://$addr/v1/responses" --body "{\"model\":\"bench\",\"input\":\"$say\"}" "${auth[@]}"
  train "http://$addr/v1/messages" --body "{\"model\":\"bench\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"$say\"}]}" "${auth[@]}"
  train "http://$addr/v1beta/models/bench:generateContent" --body "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"$say\"}]}]}" "${auth[@]}"
done
train "http://$LEAN/v1/chat/completions" --model bench
train "http://$LEAN/v1/chat/completions" --model bench --stream --max-tokens 20
train "http://$LEAN_TOOLS/mcp" --body "${call/bench-tools__echo/echo}"

# The servers write their counts as they exit: stop them now, not at the script's end.
bench_cleanup
trap - EXIT
ls "$profiles"/*.profraw >/dev/null
"$profdata" merge -o "$merged" "$profiles"/*.profraw
echo "building the servers with the profile (target/pgo) ..." >&2
CARGO_TARGET_DIR=$use_dir RUSTFLAGS="-Cprofile-use=$merged" \
  cargo build --release --target "$host" "${servers[@]}" 2>&1 | tail -1
echo "pgo: $use_dir/$host/release/tollgate and examples/lean_floor" >&2
