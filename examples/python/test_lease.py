"""keylock as a test double for redis-py: one server per test session,
KEYLOCK RESET between tests, virtual time instead of sleeping.

    pip install redis pytest
    KEYLOCK_BIN=target/release/keylock pytest examples/python
"""
import os
import subprocess

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


@pytest.fixture(scope="session")
def keylock_server():
    binary = os.environ.get("KEYLOCK_BIN", "keylock")
    proc = subprocess.Popen([binary, "--port", "0"], stdout=subprocess.PIPE, text=True)
    # The first line is "listening on 127.0.0.1:PORT", printed once bound.
    host, port = proc.stdout.readline().split()[-1].rsplit(":", 1)
    yield host, int(port)
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def r(keylock_server):
    host, port = keylock_server
    # redis-py retries connection errors (and LOADING) by default, which
    # would hide the faults these tests inject.
    client = redis.Redis(host=host, port=port, decode_responses=True, retry=Retry(NoBackoff(), 0))
    client.execute_command("KEYLOCK", "RESET")  # a fresh server for every test
    yield client
    client.close()


def test_a_lease_runs_out_without_sleeping(r):
    r.set("lease", "worker-1", px=30_000)
    r.execute_command("KEYLOCK", "CLOCK", "ADVANCE", 30_000)
    assert r.get("lease") is None


def test_the_reply_to_a_write_can_be_lost(r):
    r.client_setname("flaky")
    r.execute_command("KEYLOCK", "FAULT", "ADD", "DISCONNECT", "set", "AFTER", "CLIENT", "flaky", "COUNT", "1")
    with pytest.raises(redis.ConnectionError):
        r.set("k", "v")
    # The write happened; only its acknowledgement was lost.
    assert r.get("k") == "v"


def test_an_injected_error(r):
    r.execute_command("KEYLOCK", "FAULT", "ADD", "ERROR", "get", "LOADING keylock is loading", "COUNT", "1")
    with pytest.raises(redis.exceptions.BusyLoadingError):
        r.get("k")
    assert r.get("k") is None
