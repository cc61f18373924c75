"""Bearer tokens and TLS against the node, served by the Go driver with an
interceptor that demands the token (TRIBUTARY_TEST_AUTH_ADDR) and, in a
second listener, with TLS too (TRIBUTARY_TEST_TLS_ADDR)."""

import unittest

from fixture import AUTH_ADDR, TLS_ADDR, TLS_CA, TOKEN, minute_aligned, needs_auth, needs_tls, unique
from tributary import Client, InvalidArgument, Point, Unauthenticated, Unavailable


@needs_auth
class TokenTest(unittest.TestCase):
    def test_token_opens_every_call(self):
        m = unique("auth")
        base = minute_aligned(10)
        with Client(AUTH_ADDR, token=TOKEN) as c:
            self.assertEqual(c.write([Point(m, {}, base, 1.0)]).accepted, 1)
            (s,) = c.query(m, start=base, end=base)
            self.assertEqual(s.values, [1.0])
            self.assertEqual(c.series(m), [{"__name__": m}])
            self.assertEqual(c.status().role, "edge")

    def test_missing_or_wrong_token_is_refused_without_retries(self):
        base = minute_aligned(10)
        for name, token in (("missing", None), ("wrong", TOKEN + "x")):
            with self.subTest(name):
                with Client(AUTH_ADDR, token=token, retries=5) as c:
                    calls = {
                        "write": lambda: c.write([Point("m", {}, base, 1.0)]),
                        "query": lambda: c.query("m", start=base, end=base),
                        "status": c.status,
                        "label_names": c.label_names,
                    }
                    for call, fn in calls.items():
                        with self.assertRaises(Unauthenticated, msg=call) as cm:
                            fn()
                        self.assertEqual(cm.exception.attempts, 1)
                        self.assertIn("bearer token", str(cm.exception))


@needs_tls
class TLSTest(unittest.TestCase):
    def test_tls_with_custom_ca(self):
        m = unique("tls")
        base = minute_aligned(10)
        with open(TLS_CA, "rb") as f:
            pem = f.read()
        for name, roots in (("path", TLS_CA), ("bytes", pem), ("text", pem.decode())):
            with self.subTest(name):
                with Client(TLS_ADDR, token=TOKEN, tls=True, root_certificates=roots) as c:
                    self.assertEqual(c.write([Point(m, {}, base, 2.0)]).accepted, 1)
                    (s,) = c.query(m, start=base, end=base)
                    self.assertEqual(s.values, [2.0])

    def test_server_name_override(self):
        with Client(TLS_ADDR.replace("127.0.0.1", "localhost"), token=TOKEN, tls=True,
                    root_certificates=TLS_CA, tls_server_name="localhost") as c:
            self.assertEqual(c.status().version, "test")

    def test_untrusted_certificate_and_plaintext_fail(self):
        # System roots do not know the test CA; a plaintext client cannot
        # talk to a TLS listener.
        for name, kw in (("system roots", dict(tls=True)), ("plaintext", dict())):
            with self.subTest(name):
                with Client(TLS_ADDR, token=TOKEN, retries=0, timeout=10, **kw) as c:
                    with self.assertRaises(Unavailable):
                        c.status()


class ClientOptionsTest(unittest.TestCase):
    def test_bad_options_are_refused(self):
        cases = {
            "certificates without tls": (dict(root_certificates=b"x"), "tls=False"),
            "token with newline": (dict(token="a\nb"), "printable ASCII"),
            "empty token": (dict(token=""), "printable ASCII"),
            "client cert without key": (dict(tls=True, client_certificate=b"x"), "go together"),
            "server name without tls": (dict(tls_server_name="x"), "needs tls=True"),
            "missing CA file": (dict(tls=True, root_certificates="/nonexistent/ca.pem"), "/nonexistent/ca.pem"),
            "zero timeout": (dict(timeout=0), "timeout"),
            "bad retries": (dict(retries="3"), "retries"),
            "tiny requests": (dict(max_request_bytes=10), "max_request_bytes"),
        }
        for name, (kw, msg) in cases.items():
            with self.subTest(name):
                with self.assertRaises(InvalidArgument) as cm:
                    Client("127.0.0.1:1", **kw)
                self.assertIn(msg, str(cm.exception))
        for addr in ("http://127.0.0.1:7070", "", "   "):
            with self.subTest(addr=addr):
                with self.assertRaises(InvalidArgument):
                    Client(addr)


if __name__ == "__main__":
    unittest.main()
