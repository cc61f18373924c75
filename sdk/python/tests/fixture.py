"""Shared test fixtures: puts the SDK on sys.path, reads the address of the
node under test from the environment, and serves fake gRPC servers.

The tests that need a real node read TRIBUTARY_TEST_ADDR (and, for auth,
TRIBUTARY_TEST_AUTH_ADDR, TRIBUTARY_TEST_TOKEN, TRIBUTARY_TEST_TLS_ADDR,
TRIBUTARY_TEST_TLS_CA). `go test ./sdk/python` starts a node in-process and
sets them all; run by hand, those tests are skipped and say why.
"""

import os
import sys
import threading
import time
import unittest
import uuid
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

import tributary  # noqa: E402
from tributary._gen import tributary_pb2 as pb  # noqa: E402
from tributary._gen import tributary_pb2_grpc as pb_grpc  # noqa: E402

ADDR = os.environ.get("TRIBUTARY_TEST_ADDR", "")
AUTH_ADDR = os.environ.get("TRIBUTARY_TEST_AUTH_ADDR", "")
TOKEN = os.environ.get("TRIBUTARY_TEST_TOKEN", "")
TLS_ADDR = os.environ.get("TRIBUTARY_TEST_TLS_ADDR", "")
TLS_CA = os.environ.get("TRIBUTARY_TEST_TLS_CA", "")

_WHY = "needs a node: set %s (go test ./sdk/python does)"
needs_node = unittest.skipUnless(ADDR, _WHY % "TRIBUTARY_TEST_ADDR")
needs_auth = unittest.skipUnless(AUTH_ADDR and TOKEN, _WHY % "TRIBUTARY_TEST_AUTH_ADDR and TRIBUTARY_TEST_TOKEN")
needs_tls = unittest.skipUnless(TLS_ADDR and TLS_CA and TOKEN, _WHY % "TRIBUTARY_TEST_TLS_ADDR, TRIBUTARY_TEST_TLS_CA and TRIBUTARY_TEST_TOKEN")


def unique(prefix: str) -> str:
    """A metric name no other test uses, so tests share one node safely."""
    return "%s_%s" % (prefix, uuid.uuid4().hex[:10])


def now_ms() -> int:
    return int(time.time() * 1000)


def minute_aligned(minutes_ago: int) -> int:
    """A timestamp on a whole minute, minutes_ago before now."""
    return (now_ms() // 60_000 - minutes_ago) * 60_000


def no_wait_client(address: str, **kw) -> "tuple[tributary.Client, list]":
    """A client whose retry waits are recorded instead of slept."""
    c = tributary.Client(address, **kw)
    waits: list = []

    def record(seconds: float) -> bool:
        waits.append(seconds)
        return False

    c._sleep = record
    return c, waits


class FakeServer:
    """An in-process gRPC server with scripted WriteService/QueryService
    behaviour, for what a healthy node never does (fail on purpose)."""

    def __init__(self, write=None, query=None):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        if write is not None:
            pb_grpc.add_WriteServiceServicer_to_server(write, self.server)
        if query is not None:
            pb_grpc.add_QueryServiceServicer_to_server(query, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = "127.0.0.1:%d" % port

    def __enter__(self) -> "FakeServer":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop(grace=None).wait()


class ScriptedWrite(pb_grpc.WriteServiceServicer):
    """Fails the first len(codes) Write calls with those codes, then accepts
    everything. Records every request. gate, when set, is waited on before
    answering."""

    def __init__(self, codes=(), gate: "threading.Event | None" = None):
        self.codes = list(codes)
        self.requests = []
        self.gate = gate
        self.lock = threading.Lock()

    def Write(self, request, context):
        if self.gate is not None:
            self.gate.wait(30)
        with self.lock:
            self.requests.append(request)
            code = self.codes.pop(0) if self.codes else None
        if code is not None:
            context.abort(code, "scripted failure %s" % code.name)
        points = sum(len(b.timestamps_ms) for b in request.batches)
        return pb.WriteResponse(accepted=points)
