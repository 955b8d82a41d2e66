#!/usr/bin/env python3
"""Connections at scale, keylock against redis-server in one run.

For each server (a fresh process per measurement, on a free loopback port):

- idle connections: RSS before, right after N clients each sent a PING,
  and once they have been idle for 4 s (both servers free an idle
  client's query buffer after 2 s); reported per connection;
- a burst of connects: M clients connect at once (non-blocking connects
  issued back to back), each then sends PING; the time until every one
  has its PONG;
- a 512 MB value: RSS before a SET of 512 MB, right after it, and 3 s
  after DEL (memory given back to the OS or not).

Needs redis-server on PATH and a built keylock (`cargo build --release`).
Prints markdown.

Usage: benches/connections.py [--idle 10000] [--burst 5000] [--big-mb 512]
       [--keylock target/release/keylock]
"""
import argparse, os, resource, select, socket, subprocess, sys, time

from benchlib import KEYLOCK, free_port


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def start(kind, keylock, clients):
    port = free_port()
    if kind == "keylock":
        cmd = [keylock, "--port", str(port), "--maxclients", str(clients)]
    else:
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--maxclients", str(clients)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.01)
    time.sleep(0.3)
    return proc, port


def stop(proc):
    proc.kill()
    proc.wait()


def idle_connections(kind, keylock, n):
    proc, port = start(kind, keylock, n + 100)
    base = rss_kb(proc.pid)
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PING\r\n")
        conns.append(s)
    for s in conns:
        s.recv(16)
    time.sleep(0.3)
    hot = rss_kb(proc.pid)
    time.sleep(4)
    idle = rss_kb(proc.pid)
    for s in conns:
        s.close()
    stop(proc)
    return base, hot, idle


def burst(kind, keylock, m):
    proc, port = start(kind, keylock, m + 100)
    socks = []
    started = time.monotonic()
    for _ in range(m):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    pending = {s.fileno(): s for s in socks}
    poll = select.epoll()
    for fd in pending:
        poll.register(fd, select.EPOLLOUT)
    sent = set()
    answered = 0
    deadline = started + 120
    while answered < m and time.monotonic() < deadline:
        for fd, ev in poll.poll(1.0):
            s = pending[fd]
            if fd not in sent and ev & select.EPOLLOUT:
                try:
                    s.send(b"PING\r\n")
                except OSError:
                    continue
                sent.add(fd)
                poll.modify(fd, select.EPOLLIN)
            elif ev & select.EPOLLIN:
                try:
                    data = s.recv(16)
                except OSError:
                    continue
                if data.startswith(b"+PONG"):
                    answered += 1
                    poll.unregister(fd)
    elapsed = time.monotonic() - started
    for s in socks:
        s.close()
    stop(proc)
    return elapsed, answered


def big_value(kind, keylock, mb):
    proc, port = start(kind, keylock, 100)
    s = socket.create_connection(("127.0.0.1", port))
    before = rss_kb(proc.pid)
    size = mb * 1024 * 1024
    s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % size)
    chunk = b"x" * (1 << 20)
    for _ in range(mb):
        s.sendall(chunk)
    s.sendall(b"\r\n")
    assert s.recv(16).startswith(b"+OK")
    time.sleep(1.5)
    held = rss_kb(proc.pid)
    s.sendall(b"*2\r\n$3\r\nDEL\r\n$3\r\nbig\r\n")
    s.recv(16)
    time.sleep(3)
    after = rss_kb(proc.pid)
    s.close()
    stop(proc)
    return before, held, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--big-mb", type=int, default=512)
    ap.add_argument("--keylock", default=KEYLOCK)
    args = ap.parse_args()
    need = max(args.idle, args.burst) + 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, need)), hard))

    print(f"| measure | keylock | redis-server |\n|---|---:|---:|")
    rows = {}
    for kind in ("keylock", "redis"):
        base, hot, idle = idle_connections(kind, args.keylock, args.idle)
        rows.setdefault("idle", []).append((base, hot, idle))
        rows.setdefault("burst", []).append(burst(kind, args.keylock, args.burst))
        rows.setdefault("big", []).append(big_value(kind, args.keylock, args.big_mb))
    n = args.idle
    print("| RSS per connection, %d clients after a PING | %.1f KB | %.1f KB |" % (
        n, *[(hot - base) / n for base, hot, _ in rows["idle"]]))
    print("| RSS per connection, the same 4 s idle | %.1f KB | %.1f KB |" % (
        *[(idle - base) / n for base, _, idle in rows["idle"]],))
    print("| %d connects at once, all answered | %.2f s | %.2f s |" % (
        args.burst, *[e for e, _ in rows["burst"]]))
    print("| RSS before / with / 3 s after DEL of a %d MB value | %s | %s |" % (
        args.big_mb, *["%d / %d / %d MB" % (b // 1024, h // 1024, a // 1024) for b, h, a in rows["big"]]))
    for (e, answered), kind in zip(rows["burst"], ("keylock", "redis")):
        if answered < args.burst:
            print(f"\n{kind}: only {answered} of {args.burst} connects answered", file=sys.stderr)


if __name__ == "__main__":
    main()
