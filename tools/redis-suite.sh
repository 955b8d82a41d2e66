#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own test suite (its tests/ directory) twice:
# with keylock as the server, then with redis-server in the same mode, and
# prints the counts side by side. The suite starts each server itself (as
# src/redis-server), so the units' `external:skip` tests run too.
#
#   tools/redis-suite.sh REDIS_SRC [unit ...]
#
# REDIS_SRC  a Redis 7.0.15 source tree (the tarball from download.redis.io
#            or `git clone -b 7.0.15 https://github.com/redis/redis`); only
#            its runtest and tests/ are used.
# unit       e.g. unit/introspection; default: the units keylock's README
#            reports.
# KEYLOCK    the keylock binary (default target/release/keylock).
# TAGS       runtest's --tags (default: none, every test; "-needs:repl
#            -repl" leaves out those that make the server a replica).
# LOGS       where each run's log goes (default /tmp/keylock-redis-suite).
# EXTERNAL   1: run each unit against servers this script starts (fresh for
#            every unit, `--enable-debug-command yes`), as external servers
#            (`runtest --host --port`): the `external:skip` tests are left
#            out, as the suite does for any external server.
#
# Needs tclsh (Debian: tcl) and redis-server, redis-cli, redis-benchmark,
# redis-check-aof and redis-check-rdb (Debian: redis-server, redis-tools).
set -euo pipefail

src=${1:?usage: tools/redis-suite.sh REDIS_SRC [unit ...]}
shift
units=("$@")
if [ ${#units[@]} -eq 0 ]; then
    units=(
        unit/type/hash unit/type/list unit/type/set unit/type/zset
        unit/type/string unit/type/incr unit/type/stream
        unit/type/stream-cgroups unit/bitops unit/bitfield
        unit/hyperloglog unit/geo unit/sort unit/dump unit/functions
        unit/scripting unit/acl unit/acl-v2 unit/info-command
        unit/introspection unit/introspection-2 unit/latency-monitor
        unit/slowlog unit/other unit/keyspace unit/expire unit/pubsub
        unit/pubsubshard unit/tracking unit/pause unit/multi
        unit/maxmemory unit/limits unit/querybuf unit/obuf-limits
        unit/protocol unit/auth unit/info unit/networking
        unit/cluster unit/cluster-scripting unit/cluster/misc
        unit/cluster/links unit/cluster/announced-endpoints
        integration/replication integration/replication-2
        integration/replication-3 integration/replication-4
        integration/replication-psync integration/replication-buffer
        integration/block-repl integration/psync2 integration/psync2-reg
        integration/psync2-pingoff integration/psync2-master-restart
        integration/failover integration/shutdown
    )
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
keylock=$(realpath "${KEYLOCK:-$repo/target/release/keylock}")
tags=${TAGS:-}
logs=${LOGS:-/tmp/keylock-redis-suite}
mkdir -p "$logs"

# One copy of the suite per server, with that server as src/redis-server.
tree() {
    local dir=$1 server=$2
    rm -rf "$dir"
    mkdir -p "$dir/src"
    cp -r "$src/runtest" "$src/tests" "$dir/"
    ln -s "$server" "$dir/src/redis-server"
    for tool in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
        ln -s "$(command -v $tool)" "$dir/src/$tool"
    done
}

count() { sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -c "^\[$2\]" || true; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run() {
    local dir=$1 unit=$2 log=$3
    if [ "${EXTERNAL:-0}" = 1 ]; then
        local port pid
        port=$(free_port)
        # In the suite's copy, so that what the tests make it save stays there.
        (cd "$dir" && exec ./src/redis-server --port "$port" --save "" --enable-debug-command yes) >"$log.server" 2>&1 &
        pid=$!
        for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
        (cd "$dir" && timeout 1800 ./runtest --host 127.0.0.1 --port "$port" --single "$unit" --clients 1 --timeout 600 --tags "$tags" >"$log" 2>&1) || true
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    else
        (cd "$dir" && timeout 1800 ./runtest --single "$unit" --clients 1 --timeout 600 --tags "$tags" >"$log" 2>&1) || true
    fi
    local stopped=""
    [ "$(count "$log" exception)" -eq 0 ] && [ "$(count "$log" TIMEOUT)" -eq 0 ] || stopped=" (stopped)"
    printf '%s/%s%s' "$(count "$log" ok)" "$(count "$log" err)" "$stopped"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree "$work/keylock" "$keylock"
tree "$work/redis" "$(command -v redis-server)"
printf '| unit | keylock ok/err | redis-server ok/err |\n|---|---|---|\n'
for unit in "${units[@]}"; do
    name=${unit//\//_}
    ours=$(run "$work/keylock" "$unit" "$logs/keylock-$name.log")
    theirs=$(run "$work/redis" "$unit" "$logs/redis-$name.log")
    printf '| %s | %s | %s |\n' "$unit" "$ours" "$theirs"
done
