#!/usr/bin/env python3
"""A second and a third opinion on multipart/form-data for UploadsTests:
Werkzeug's form parser (the one Flask uses), from PyPI, pinned and installed
by .ci/run, and the standard library's MIME parser (`email`), which keeps
every header of every part.

Listens on 127.0.0.1 on a free port and prints `READY <port>` alone on its
first stdout line once listening (`UNAVAILABLE <reason>` and exits when
Werkzeug is missing); prints nothing else to stdout. Exits when its
standard input reaches EOF (the test that started it went away, even if it
crashed) or on SIGTERM.

Every POST, PUT or PATCH is parsed as a form and answered 201 with JSON:
{"method": M, "entries": [...], "parts": [...], "contentLength": N,
"received": N, "transferEncoding": S}. Werkzeug's reading is `entries`, each
{"name", "value"} for a field or {"name", "filename", "type", "size",
"sha256", "headers"} for a file, fields first then files (Werkzeug keeps
them apart), each in the order sent. The `email` parser's is `parts`, every
part in order, each {"name", "filename", "type", "size", "sha256",
"headers"} (`type` is the part's Content-Type header, null without one;
names and file names as they came, `%22` not decoded; `headers` every header
as [name, value], in order). `received` is the bytes of body read. A request
that is not a form is answered 415; one a parser refuses, 400.
"""
import email.parser
import email.policy
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
    if request.method not in ("POST", "PUT", "PATCH"):
        return Response("only POST, PUT and PATCH", 405)(environ, start_response)
    if request.mimetype != "multipart/form-data":
        return Response(f"not a form: {request.mimetype}", 415)(environ, start_response)
    try:
        # Kept, so that both parsers read the same bytes.
        body = request.get_data(cache=True)
        entries = [{"name": name, "value": value} for name, value in request.form.items(multi=True)]
        for name, file in request.files.items(multi=True):
            data = file.read()
            entries.append({
                "name": name,
                "filename": file.filename,
                "type": file.content_type,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "headers": [[key, value] for key, value in file.headers.items()],
            })
    except HTTPException as error:
        return Response(f"bad form: {error.description}", 400)(environ, start_response)
    parts = email_parts(request.headers["Content-Type"], body)
    if parts is None:
        return Response("bad form: the email parser found no parts", 400)(environ, start_response)
    answer = {
        "method": request.method,
        "parts": parts,
        "entries": entries,
        "contentLength": request.content_length,
        "received": counting.count,
        "transferEncoding": request.headers.get("Transfer-Encoding"),
    }
    return Response(json.dumps(answer), 201, mimetype="application/json")(environ, start_response)


def email_parts(content_type, body):
    """The parts of a form as the standard library's MIME parser reads them;
    None when it finds none or reads something wrong."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if not message.is_multipart() or message.defects:
        return None

    def text(value):
        # Bytes that are not ASCII come as surrogates: UTF-8, as sent.
        return None if value is None else str(value).encode("utf-8", "surrogateescape").decode("utf-8")

    parts = []
    for part in message.iter_parts():
        if part.defects:
            return None
        data = part.get_payload(decode=True) or b""
        parts.append({
            "name": text(part.get_param("name", header="content-disposition")),
            "filename": text(part.get_filename()),
            "type": text(part.get("Content-Type")),
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "headers": [[text(key), text(value)] for key, value in part.raw_items()],
        })
    return parts


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
