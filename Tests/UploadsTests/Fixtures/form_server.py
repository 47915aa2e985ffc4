#!/usr/bin/env python3
"""A second opinion on multipart/form-data for UploadsTests: Werkzeug's form
parser (the one Flask uses), from PyPI, pinned and installed by .ci/run.

Listens on 127.0.0.1 on a free port and prints `READY <port>` alone on its
first stdout line once listening (`UNAVAILABLE <reason>` and exits when
Werkzeug is missing); prints nothing else to stdout. Exits when its
standard input reaches EOF (the test that started it went away, even if it
crashed) or on SIGTERM.

Every POST is parsed as a form and answered 201 with JSON:
{"entries": [...], "contentLength": N, "received": N, "transferEncoding": S},
each entry {"name", "value"} for a field or {"name", "filename", "type",
"size", "sha256"} for a file, fields first then files (Werkzeug keeps them
apart), each in the order sent; `received` is the bytes of body read. A
request that is not a form is answered 415; one the parser refuses, 400.
"""
import hashlib
import json
import os
import signal
import sys
import threading

try:
    from werkzeug.exceptions import HTTPException
    from werkzeug.serving import WSGIRequestHandler, make_server
    from werkzeug.wrappers import Request, Response
except ImportError as error:
    print(f"UNAVAILABLE {error}", flush=True)
    sys.exit(1)


class CountingStream:
    """The request's body, counting the bytes read from it."""

    def __init__(self, stream):
        self.stream = stream
        self.count = 0

    def read(self, *args):
        data = self.stream.read(*args)
        self.count += len(data)
        return data

    def readline(self, *args):
        data = self.stream.readline(*args)
        self.count += len(data)
        return data


def app(environ, start_response):
    counting = CountingStream(environ["wsgi.input"])
    environ["wsgi.input"] = counting
    request = Request(environ)
    request.max_form_memory_size = 1024 * 1024
    if request.method != "POST":
        return Response("only POST", 405)(environ, start_response)
    if request.mimetype != "multipart/form-data":
        return Response(f"not a form: {request.mimetype}", 415)(environ, start_response)
    try:
        entries = [{"name": name, "value": value} for name, value in request.form.items(multi=True)]
        for name, file in request.files.items(multi=True):
            data = file.read()
            entries.append({
                "name": name,
                "filename": file.filename,
                "type": file.content_type,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            })
    except HTTPException as error:
        return Response(f"bad form: {error.description}", 400)(environ, start_response)
    answer = {
        "entries": entries,
        "contentLength": request.content_length,
        "received": counting.count,
        "transferEncoding": request.headers.get("Transfer-Encoding"),
    }
    return Response(json.dumps(answer), 201, mimetype="application/json")(environ, start_response)


class QuietHandler(WSGIRequestHandler):
    """Logs nothing: the tests' output is the tests'."""

    def log_request(self, *args):
        pass


def main():
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"READY {server.server_port}", flush=True)

    def stop(*_):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    # Stop when the test that started us goes away, even if it crashed.
    while sys.stdin.buffer.read(4096):
        pass
    stop()


if __name__ == "__main__":
    main()
