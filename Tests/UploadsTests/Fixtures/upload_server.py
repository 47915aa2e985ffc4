#!/usr/bin/env python3
"""A small upload server for UploadsTests, on Python's standard library only.

Listens on 127.0.0.1 on a free port and prints the port on its first line.
Stores what it receives (method, path, headers, byte count, SHA-256, and
the body itself when small); bodies are hashed as they stream in, never
held whole. Behaviour per path is set with POST /_control:

  {"path": "/a.jpg", "status": 500, "times": 1}   answer 500 (the first N times)
  {"path": "/a.jpg", "delay": 2.0}                answer after 2 seconds
  {"path": "/a.jpg", "drop": true}                 close the connection mid-body
  {"path": "/a.jpg", "read_delay": 0.01}           read the body slowly

GET /_received      every upload received so far, as JSON
GET /_wait?path=P   waits (up to 10 s) until an upload of P has ended
"""
import hashlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

CHUNK = 64 * 1024
SMALL = 64 * 1024

lock = threading.Condition()
received = []
rules = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/_received":
            with lock:
                self.answer(200, json.dumps(received).encode(), "application/json")
        elif url.path == "/_wait":
            path = parse_qs(url.query).get("path", [""])[0]
            with lock:
                lock.wait_for(lambda: any(r["path"] == path for r in received), timeout=10)
                found = [r for r in received if r["path"] == path]
            self.answer(200 if found else 404, json.dumps(found).encode(), "application/json")
        else:
            self.answer(404, b"not found", "text/plain")

    def do_POST(self):
        if self.path == "/_control":
            rule = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with lock:
                rules[rule.pop("path")] = rule
            self.answer(204, b"", "text/plain")
        else:
            self.upload()

    def do_PUT(self):
        self.upload()

    def upload(self):
        path = urlparse(self.path).path
        with lock:
            rule = dict(rules.get(path, {}))
        record = {
            "method": self.command,
            "path": path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "length": 0,
            "complete": False,
        }
        digest = hashlib.sha256()
        small = bytearray()
        try:
            for chunk in self.body_chunks(rule):
                digest.update(chunk)
                record["length"] += len(chunk)
                if len(small) < SMALL:
                    small += chunk[: SMALL - len(small)]
            record["complete"] = True
        except (ConnectionError, socket.timeout, ValueError):
            pass
        record["sha256"] = digest.hexdigest()
        record["body"] = small.decode("latin-1") if record["length"] <= SMALL else None
        with lock:
            received.append(record)
            lock.notify_all()
        if not record["complete"]:
            self.close_connection = True
            return
        if rule.get("delay"):
            # Answering slowly on request is this fixture's job: the Swift
            # test that asks for it checks the uploader's timeout.
            time.sleep(rule["delay"])
        status = rule.get("status")
        if status and rule.get("times", 1) > 0:
            with lock:
                rules[path]["times"] = rule.get("times", 1) - 1
            self.answer(status, f"boom: the server failed on {path}".encode(), "text/plain")
        else:
            self.answer(201, b"stored", "text/plain")

    def body_chunks(self, rule):
        """Yields the body; raises ConnectionError when it ends early."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            yield from self.chunked_body(rule)
            return
        remaining = int(self.headers.get("Content-Length", "0"))
        sent = 0
        while remaining > 0:
            chunk = self.rfile.read(min(CHUNK, remaining))
            if not chunk:
                raise ConnectionError("body ended early")
            remaining -= len(chunk)
            sent += len(chunk)
            yield chunk
            self.pace(rule, sent)

    def chunked_body(self, rule):
        sent = 0
        while True:
            size = int(self.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                self.rfile.readline()
                return
            while size > 0:
                chunk = self.rfile.read(min(CHUNK, size))
                if not chunk:
                    raise ConnectionError("body ended early")
                size -= len(chunk)
                sent += len(chunk)
                yield chunk
                self.pace(rule, sent)
            self.rfile.readline()

    def pace(self, rule, sent):
        if rule.get("drop") and sent >= CHUNK:
            self.connection.shutdown(socket.SHUT_RDWR)
            raise ConnectionError("dropped on purpose")
        if rule.get("read_delay"):
            # Reading slowly on request keeps an upload in flight long
            # enough for the cancellation test to cancel it midway.
            time.sleep(rule["read_delay"])

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    # Stop when the test that started us goes away, even if it crashed.
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
