#!/usr/bin/env bash
# redis-py's own test suite, run against redis-server and against keylock,
# and the tests that pass on one of them only.
#
#   tools/redis-py-suite.sh [extra pytest arguments…]
#
# The tests are those of the redis-py release on PyPI (its sdist ships
# tests/), run with that release installed in a virtualenv. Both servers are
# started here on ports of their own, with the same flags, one after the
# other (the suite leans on timing, so the runs do not share the CPU).
# Cluster, module, TLS, sentinel, replica and enterprise-endpoint tests need
# servers this script does not start: they are left out on both sides.
# Takes about ten minutes on this project's 2-core machine; not part of CI.
#
# Environment: REDIS_PY_VERSION (8.1.0), KEYLOCK_BIN
# (target/release/keylock), REDIS_SERVER (redis-server), WORK_DIR
# (/tmp/keylock-redis-py: venv, tests, servers' directories, JUnit files).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${REDIS_PY_VERSION:-8.1.0}
keylock=$(realpath "${KEYLOCK_BIN:-target/release/keylock}")
redis_server=$(command -v "${REDIS_SERVER:-redis-server}")
work=${WORK_DIR:-/tmp/keylock-redis-py}
mkdir -p "$work"

venv=$work/venv-$version
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "redis==$version" pytest==9.2.0 pytest-asyncio==1.5.0 \
    pytest-timeout==2.4.0 packaging numpy pybreaker redis-entraid aiohttp ujson xxhash \
    opentelemetry-api opentelemetry-sdk
fi
src=$work/redis-$version
if [ ! -d "$src/tests" ]; then
  "$venv/bin/pip" download -q "redis==$version" --no-binary :all: --no-deps -d "$work"
  tar -xzf "$work/redis-$version.tar.gz" -C "$work"
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run NAME BINARY [pytest arguments…]: start the server, run the suite against it, stop it.
run() {
  local name=$1 bin=$2 port dir pid
  shift 2
  port=$(free_port)
  dir=$work/$name-data
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && exec "$bin" --port "$port" --dir "$dir" --save '' --appendonly no \
    --enable-debug-command yes >"$dir/log" 2>&1) &
  pid=$!
  for _ in $(seq 50); do
    "$venv/bin/python" -c "import redis; redis.Redis(port=$port).ping()" 2>/dev/null && break
    sleep 0.1
  done
  echo "== redis-py $version tests against $name (port $port)"
  (cd "$src" && "$venv/bin/python" -m pytest -p no:cacheprovider -q --timeout 30 \
    -m 'not onlycluster and not redismod and not ssl and not cp_integration and not multidb_integration and not replica' \
    --ignore=tests/test_scenario --ignore=tests/test_sentinel.py --ignore=tests/test_asyncio/test_sentinel.py \
    --redis-url="redis://localhost:$port/0" --junitxml="$work/$name.xml" "$@" tests \
    >"$work/$name.log" 2>&1) || true
  tail -n 1 "$work/$name.log"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

run redis-server "$redis_server" "$@"
run keylock "$keylock" "$@"

"$venv/bin/python" - "$work/redis-server.xml" "$work/keylock.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET

def outcomes(path):
    result = {}
    for case in ET.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        name = f"{case.get('classname')}::{case.get('name')}"
        result[name] = "fail" if tags & {"failure", "error"} else "skip" if "skipped" in tags else "pass"
    return result

redis, keylock = outcomes(sys.argv[1]), outcomes(sys.argv[2])
passed = {name for name, outcome in redis.items() if outcome == "pass"}
missing = sorted(name for name in passed if keylock.get(name) != "pass")
for name in missing:
    print(f"passes on redis-server, {keylock.get(name, 'absent')} on keylock: {name}")
for name in sorted(n for n, outcome in keylock.items() if outcome == "pass" and n not in passed):
    print(f"passes on keylock, {redis.get(name, 'absent')} on redis-server: {name}")
print(f"keylock passes {len(passed) - len(missing)} of the {len(passed)} tests that pass on redis-server")
EOF
