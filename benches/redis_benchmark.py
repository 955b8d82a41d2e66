#!/usr/bin/env python3
"""keylock vs redis-server under redis-benchmark, in one run on one machine.

Starts a release keylock and Debian's redis-server on free loopback ports,
runs `redis-benchmark -q -n N -t TEST -P P` for each test against each,
alternating servers test by test, ROUNDS times, and prints the median requests/second per test and
the ratio keylock/redis. Needs `cargo build --release` done, redis-server
and redis-benchmark on PATH.

Usage: benches/redis_benchmark.py [-n 100000] [--rounds 3] [--pipeline 1 16]
"""
import argparse, os, re, socket, statistics, subprocess, sys, tempfile, time

TESTS = "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset"
from benchlib import KEYLOCK, free_port


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit("server on port %d did not start" % port)


def run_benchmark(port, n, tests, pipeline):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-q", "-n", str(n), "-t", tests, "-P", str(pipeline)],
        capture_output=True, text=True, check=True).stdout
    results = {}
    for line in out.replace("\r", "\n").splitlines():
        m = re.match(r"^\s*([A-Z0-9_]+(?: \(.*?\))?): ([\d.]+) requests per second", line)
        if m:
            results[m.group(1)] = float(m.group(2))
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pipeline", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--tests", default=TESTS)
    args = ap.parse_args()

    keylock_bin = KEYLOCK
    if not os.path.exists(keylock_bin):
        sys.exit("build keylock first: cargo build --release")
    kport, rport = free_port(), free_port()
    tmp = tempfile.mkdtemp()
    servers = [
        subprocess.Popen([keylock_bin, "--port", str(kport)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(["redis-server", "--port", str(rport), "--save", "", "--appendonly", "no", "--dir", tmp],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    try:
        wait_port(kport)
        wait_port(rport)
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        print("# redis-benchmark -q -n %d -t %s, %d rounds (median), %d cores, redis-server %s"
              % (args.n, args.tests, args.rounds, os.cpu_count(), version))
        for p in args.pipeline:
            samples = {"keylock": {}, "redis": {}}
            # Alternate servers test by test, so a change in machine load
            # affects both sides of each ratio alike.
            for _ in range(args.rounds):
                for test in args.tests.split(","):
                    for name, port in (("keylock", kport), ("redis", rport)):
                        for label, rps in run_benchmark(port, args.n, test, p).items():
                            samples[name].setdefault(label, []).append(rps)
            print()
            print("| -P %d | keylock req/s | redis req/s | keylock/redis |" % p)
            print("|---|---:|---:|---:|")
            for test in samples["redis"]:
                k = statistics.median(samples["keylock"].get(test, [0]))
                r = statistics.median(samples["redis"][test])
                print("| %s | %.0f | %.0f | %.2f |" % (test, k, r, k / r if r else 0))
    finally:
        for s in servers:
            s.terminate()
            s.wait()


if __name__ == "__main__":
    main()
