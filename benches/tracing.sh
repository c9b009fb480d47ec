#!/usr/bin/env bash
# What tracing costs (issue 52): chat completions (JSON) through Tollgate on SQLite with traces
# off, with traces on at the default sample_ratio (0.1) and at 1.0, each exporting to a sink
# that answers every export 200 (`tollgate-bench sink`): p50/p99 at a fixed rate, then max rps
# and the proxy's CPU per request on 64 connections; the three interleaved for ROUNDS rounds
# (default 3) so that the machine's drift falls on all of them alike. The goal: CPU per request
# at the default ratio within 5 % of traces off. Beside them, the same gateway with its request
# log off (`[telemetry.request_log] enabled = false`; the log is on by default, so every other
# row of the benches writes a record per request): what the record costs.
#
# Sourced by benches/load.sh (its setup, fakes and tg_sqlite are used: `tracing_rows`), or run
# alone: `bash benches/tracing.sh` (release builds); `BIN_DIR=target/debug bash
# benches/tracing.sh` runs it on debug builds already made, to try the rows (no build; figures
# of a debug build mean nothing).

# Starts the two traced instances beside tg_sqlite and prints the table.
tracing_rows() {
  local SINK=127.0.0.1:19113 TG4=127.0.0.1:19114 TG5=127.0.0.1:19115 TG6=127.0.0.1:19116
  "$BENCH" sink --listen "$SINK" 2>/dev/null & pids+=($!)
  local otlp="[telemetry]
otlp_endpoint = \"http://$SINK/v1/traces\""
  TG_EXTRA_TOML="$otlp" start_tollgate tg_traced_default "$TG5" "sqlite://$work/traced-default.db" ""
  TG_EXTRA_TOML="$otlp
sample_ratio = 1.0" start_tollgate tg_traced_all "$TG4" "sqlite://$work/traced-all.db" ""
  TG_EXTRA_TOML="[telemetry.request_log]
enabled = false" start_tollgate tg_no_log "$TG6" "sqlite://$work/no-log.db" ""
  interleaved_rows tracing "$work/tracing.jsonl" \
    "tollgate-sqlite|$TG1|Authorization: Bearer $tg_sqlite_key" \
    "tollgate-traced-default|$TG5|Authorization: Bearer $tg_traced_default_key" \
    "tollgate-traced-all|$TG4|Authorization: Bearer $tg_traced_all_key" \
    "tollgate-no-request-log|$TG6|Authorization: Bearer $tg_no_log_key"
  interleaved_table "$work/tracing.jsonl" '[
    ["tollgate-sqlite", "traces off (request log on: the default)", "tollgate-sqlite"],
    ["tollgate-traced-default", "traces on, sample_ratio 0.1 (default)", "tollgate-sqlite"],
    ["tollgate-traced-all", "traces on, sample_ratio 1.0", "tollgate-sqlite"],
    ["tollgate-no-request-log", "traces off, request log off", "tollgate-sqlite"]]' \
    "chat JSON, tollgate-sqlite" "goal: CPU per request at the default sample_ratio within 5 % of traces off (≤ 1.05×)"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  RPS=${RPS:-1000} RATE_SECS=${RATE_SECS:-15} MAX_SECS=${MAX_SECS:-10}
  # shellcheck source=benches/lib.sh
  . benches/lib.sh
  if [ -n "${BIN_DIR:-}" ]; then
    BENCH=$BIN_DIR/tollgate-bench TOLLGATE=$BIN_DIR/tollgate
    work=$(mktemp -d)
    pids=()
    trap bench_cleanup EXIT
  else
    bench_setup no-nginx
  fi
  start_fakes 50 10
  start_tollgate tg_sqlite "$TG1" "sqlite://$work/ledger.db" ""
  tracing_rows
fi
