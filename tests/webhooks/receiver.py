#!/usr/bin/env python3
"""A small webhook receiver that verifies every message with the
`standardwebhooks` package (PyPI), an implementation independent of ours.

    pip install standardwebhooks
    python3 tests/webhooks/receiver.py --port 9000 --secret whsec_... [--log received.jsonl]

It answers 204 to a message whose signature verifies and 401 to one that
does not, and prints (or appends to --log) one JSON line per message:
{"webhookId", "verified", "type", "eventId", "timestamp", "receivedAt"}. The tests, the
webhook benchmark and docs/webhooks.md use it.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from standardwebhooks import Webhook
except ImportError:
    sys.exit("the standardwebhooks package is missing: pip install standardwebhooks")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", required=True, help="the whsec_ secret `webhook create` printed")
    parser.add_argument("--log", help="append one JSON line per message here (default: stdout)")
    args = parser.parse_args()
    verifier = Webhook(args.secret)
    out = open(args.log, "a", buffering=1) if args.log else sys.stdout
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                payload = verifier.verify(body, headers)
                verified = True
            except Exception:  # any verification failure
                payload = json.loads(body or b"{}")
                verified = False
            line = json.dumps({
                "webhookId": headers.get("webhook-id"),
                "verified": verified,
                "type": payload.get("type"),
                "eventId": payload.get("eventId"),
                "timestamp": payload.get("timestamp"),
                "receivedAt": time.time(),
            })
            with lock:
                out.write(line + "\n")
                out.flush()
            self.send_response(204 if verified else 401)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
