#!/usr/bin/env python3
"""
An S3 test backend for UploadsTests: moto's S3 server behind a counting,
fault-injecting proxy, plus an "app backend" that hands out presigned URLs.

The uploader under test never holds AWS credentials. It asks this process for
presigned URLs (made with boto3, dummy credentials) and sends its requests to
them; the URLs point at the proxy, which records each request (bytes actually
received, status answered), applies fault rules, and forwards the rest to a
real S3 implementation (moto's ThreadedMotoServer) holding bucket `jobkit`.

Process protocol
    Run as `python3 s3_backend.py`. Listens on 127.0.0.1 only, on free ports.
    If boto3 or moto.server cannot be imported, prints `UNAVAILABLE <reason>`
    and exits with code 3 (the tests skip). Otherwise prints exactly one line,
    `READY <port>`, once everything is listening, and nothing more to stdout.
    Exits (code 0) when standard input reaches EOF (the test that started it
    closed it or died), on SIGTERM, or on Ctrl-C.

Endpoints (all on the one port)
    POST /presign                 {"operation" (ours or S3's action name, "UploadPart"),
                                  "key", "uploadId", "partNumber",
                                  "partNumberMarker", "maxParts", "expiresIn",
                                  "contentMD5" (signed for putObject and uploadPart,
                                  as a backend that signs headers does),
                                  "generation" (optional: the clean its test
                                  began after; an earlier one's is refused
                                  with 410, so an uploader of an earlier
                                  test that presigns late sends nothing)}
                                  -> {"url": "http://127.0.0.1:<port>/jobkit/<key>?..."}
                                  operations: putObject, createMultipartUpload,
                                  uploadPart, completeMultipartUpload,
                                  abortMultipartUpload, listParts, headObject
    POST /_control/rules          a JSON list of rules, replacing the current ones
    POST /_control/reset          clear the rules and the request records
    POST /_control/clean?wait=S   as new for the next test: clear the rules and
                                  records and empty moto (the bucket stays,
                                  empty) -> {"ok": true, "generation": G},
                                  G counting the cleans; refused with 409
                                  {"inFlight": N} while requests are in flight
                                  after S seconds (0 by default).
                                  A request to a URL presigned before only is
                                  then an earlier test's, sent late (an abort
                                  in the background): answered 410 and not
                                  recorded
    GET  /_control/requests       the records of every proxied request, in order
    GET  /_control/object?key=K   {"exists", "size", "sha256", "etag"} (from moto)
    GET  /_control/uploads        {"uploads": [{"key", "uploadId"}]} (from moto)
    GET  /_control/parts?key=K&uploadId=U
                                  {"parts": [{"partNumber", "size", "etag"}]}
                                  (plus "error": code if moto refused)
    GET  /_control/wait?operation=OP&count=N&timeout=S[&received=1][&bytes=B]
                                  block until N records of OP were answered (with
                                  received=1: had arrived) and B body bytes had
                                  arrived in all, or S seconds (at most 30)
                                  passed -> {"ok", "count"}
    GET  /_control/hold?bytes=B&timeout=S
                                  hold the request whose body is still arriving
                                  once B body bytes have arrived in all (the one
                                  the B-th byte is part of, or the next to send
                                  any if that one's body ended there): it is not
                                  read further. -> {"held": true} once one is
                                  held, {"held": false} after S seconds (at most
                                  30), the hold forgotten
    POST /_control/release        reset the connection of every request held,
                                  without reading the rest of its body (recorded
                                  with status 0 and the bytes read), let those a
                                  rule's "hold" keeps go on, forget a hold not yet
                                  taken -> {"released": N}, once each is answered. A test holds a
                                  request, kills its client and releases it: a
                                  kill in the middle of a body, arranged rather
                                  than hoped for. (Bytes the killed client had
                                  left in its kernel's buffers would still arrive
                                  on this machine, and could end the body.) A
                                  request held for 30 s is reset the same way.
    anything else                 proxied to moto (paths /jobkit/...)

Rules (matched in order; the first whose selectors all equal the request's,
and which has `times` left, applies; `times` is unlimited when absent)
    selectors: "operation", "partNumber", "method", "key"
    {"operation": "uploadPart", "partNumber": 2, "status": 500, "times": 1}
        read the whole body, then answer 500 with an S3-style XML error
        ("code"/"message" optional; default code InternalError for 5xx,
        AccessDenied for 403, InvalidRequest otherwise)
    {"operation": "uploadPart", "key": "a.mp4", "partNumber": 4, "holdFor": 30}
        read the whole body, then wait that many seconds (at most 30) before
        answering or forwarding: a request still in flight
    {"operation": "createMultipartUpload", "hold": true}
        read the whole body, then wait for POST /_control/release (at most 30
        seconds) before answering or forwarding: a request in flight until the
        test lets it go
    {"operation": "uploadPart", "dropAfter": 1048576}
        read at most that many body bytes, then reset the connection without
        answering (recorded with status 0)
    {"presign": "uploadPart", "status": 503}
        POST /presign for that operation answers 503 (a refusing backend);
        "partNumber" is honoured as a selector here too
    {"operation": "uploadPart", "partNumber": 2, "corrupt": true, "times": 1}
        flip one bit of the body's middle byte as it arrives: a byte changed
        on the way, which the Content-MD5 check then refuses
    {"operation": "uploadPart", "partNumber": 2, "corrupt": "stored"}
        flip it after the Content-MD5 check, and forward the body without
        its Content-MD5: moto stores other bytes than were sent, as a
        storage that does not check Content-MD5 would, and its ETag says so
    {"operation": "putObject", "kms": true}
        answer as S3 does for an object encrypted with a KMS key: the header
        x-amz-server-side-encryption: aws:kms, and an ETag that is no MD5

Content-MD5 (S3's behaviour, which moto lacks)
    A request whose Content-MD5 header is not the base64 of 16 bytes is
    answered 400 InvalidDigest; one whose body does not have that MD5, 400
    BadDigest, and neither reaches moto. moto stores whatever it is sent.

Request records
    {"method", "path", "key", "query", "partNumber", "uploadId", "operation",
     "bytes", "status", "chunked", "contentLength", "contentMD5", "expect",
     "bodyMD5" (base64, once the whole body arrived)}
    `bytes` counts body bytes as they arrive; `status` is null while the
    request is in flight, then the status answered (0 if the connection was
    dropped). Requests with a Transfer-Encoding header are refused with 400.

Forwarding
    Requests go to moto as sent (same path, query and Host header, which the
    signature covers), minus hop-by-hop headers, with one change: a body sent
    as application/x-www-form-urlencoded (curl's, urllib's and URLSession's
    default for a body without a type) is forwarded as
    application/octet-stream, because moto misreads such bodies (see
    is_form_content_type). No "100 Continue" is ever sent.
"""

import base64
import binascii
import hashlib
import http.client
import json
import logging
import os
import signal
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape as xml_escape

try:
    import boto3
    import botocore.config
    from botocore.exceptions import ClientError
    from moto.server import ThreadedMotoServer
except Exception as error:  # ImportError, or a broken dependency of moto
    print(f"UNAVAILABLE {type(error).__name__}: {error}".splitlines()[0], flush=True)
    sys.exit(3)


BUCKET = "jobkit"
REGION = "us-east-1"
CHUNK = 64 * 1024
HOLD_LIMIT_SECONDS = 30.0  # a request held and never released is reset then
MAX_WAIT_SECONDS = 30.0

# Headers that describe one hop, never forwarded in either direction.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "expect",
    "te",
    "trailer",
    "upgrade",
}

# operation name in /presign -> (boto3 client method, required JSON fields)
PRESIGN_OPERATIONS = {
    "putObject": ("put_object", ()),
    "createMultipartUpload": ("create_multipart_upload", ()),
    "uploadPart": ("upload_part", ("uploadId", "partNumber")),
    "completeMultipartUpload": ("complete_multipart_upload", ("uploadId",)),
    "abortMultipartUpload": ("abort_multipart_upload", ("uploadId",)),
    "listParts": ("list_parts", ("uploadId",)),
    "headObject": ("head_object", ()),
}


def s3_client(endpoint_url):
    """A boto3 S3 client on path-style SigV4 URLs with the dummy credentials."""
    config = botocore.config.Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        # No flexible checksums: presigned URLs and direct calls stay plain.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        retries={"max_attempts": 1},
    )
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        config=config,
        region_name=REGION,
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    )


def infer_operation(method, query):
    """The S3 operation a proxied request performs, from its method and query."""
    if method == "PUT":
        return "uploadPart" if "partNumber" in query else "putObject"
    if method == "POST" and "uploads" in query:
        return "createMultipartUpload"
    if method == "POST" and "uploadId" in query:
        return "completeMultipartUpload"
    if method == "DELETE" and "uploadId" in query:
        return "abortMultipartUpload"
    if method == "GET" and "uploadId" in query:
        return "listParts"
    if method == "HEAD":
        return "headObject"
    return "other"


def is_form_content_type(content_type):
    """Whether moto would take a body with this Content-Type for an HTML form.

    moto's server treats an application/x-www-form-urlencoded body as an AWS
    query-protocol form: it hangs on one that is not UTF-8 (it consumes the
    stream, fails to decode it, then waits for the body again) and loses the
    XML of a CompleteMultipartUpload (answering 500). S3 does neither, and
    curl, urllib and URLSession send that type by default for a body without
    one, so the proxy forwards such bodies as application/octet-stream. The
    presigned URLs do not sign Content-Type, so signatures are unaffected.
    """
    return content_type.strip().lower().startswith("application/x-www-form-urlencoded")


def s3_error_xml(code, message):
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{xml_escape(code)}</Code>"
        f"<Message>{xml_escape(message)}</Message></Error>"
    ).encode()


def content_md5_refusal(header, body_md5):
    """S3's check of a Content-MD5 header against the body's MD5 (base64):
    None when it passes or there is no header, else (code, message)."""
    if header is None:
        return None
    try:
        digest = base64.b64decode(header, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != 16:
        return ("InvalidDigest", "The Content-MD5 you specified was not valid.")
    if header != body_md5 and base64.b64encode(digest).decode() != body_md5:
        return ("BadDigest", "The Content-MD5 you specified did not match what we received.")
    return None


def default_error_code(status):
    if status >= 500:
        return "InternalError"
    if status == 403:
        return "AccessDenied"
    return "InvalidRequest"


def signature_of(query):
    """The X-Amz-Signature of a URL's query, if it has one."""
    return dict(urllib.parse.parse_qsl(query, keep_blank_values=True)).get("X-Amz-Signature")


def as_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class State:
    """Rules and request records, shared by all handler threads under one lock."""

    def __init__(self):
        self.changed = threading.Condition(threading.Lock())
        self.rules = []
        self.records = []
        # GET /_control/hold: the body bytes in all at which the next
        # request still arriving is held; holds taken; the requests held.
        self.hold_at = None
        self.holds_taken = 0
        self.held = []
        # The signatures of the URLs presigned since the last clean, and
        # before it (an earlier test's).
        self.signatures = set()
        self.earlier_signatures = set()
        self.generation = 0

    def set_rules(self, rules):
        with self.changed:
            self.rules = [dict(rule) for rule in rules]

    def reset(self):
        with self.changed:
            self.rules = []
            self.records = []
            self.hold_at = None
            self.changed.notify_all()

    def take_rule(self, presign_operation=None, **facts):
        """The first rule matching, with one of its `times` used up, or None.

        With presign_operation, only rules with a "presign" selector for that
        operation are considered; otherwise only rules without one.
        """
        with self.changed:
            for rule in self.rules:
                if presign_operation is not None:
                    if rule.get("presign") != presign_operation:
                        continue
                elif "presign" in rule:
                    continue
                if any(
                    selector in rule and rule[selector] != value
                    for selector, value in facts.items()
                ):
                    continue
                times = rule.get("times")
                if times is not None:
                    if times <= 0:
                        continue
                    rule["times"] = times - 1
                return dict(rule)
        return None

    def add_record(self, record, query):
        """Record `record`, a request with `query`, unless it was presigned
        before the last clean only (an earlier test's, sent late): then
        False. Checked and recorded under one lock, so that a clean comes
        either before the check (the request is refused) or after the
        record (the clean sees it in flight), never between."""
        with self.changed:
            if self.is_earlier_tests_locked(query):
                return False
            self.records.append(record)
            self.changed.notify_all()
            return True

    def add_bytes(self, record, count, more_to_come):
        """Count `count` more body bytes of `record`; an Event to wait on
        until the request is released if it is to be held here."""
        with self.changed:
            record["bytes"] += count
            self.changed.notify_all()
            if self.hold_at is None or not more_to_come:
                return None
            if sum(other["bytes"] for other in self.records) < self.hold_at:
                return None
            self.hold_at = None
            self.holds_taken += 1
            released = threading.Event()
            self.held.append((record, released))
            return released

    def hold(self, body_bytes, timeout):
        """Hold the request still arriving once `body_bytes` have arrived in
        all; whether one was held within `timeout` (if not, the hold is
        forgotten)."""
        with self.changed:
            taken = self.holds_taken
            self.hold_at = body_bytes
            held = self.changed.wait_for(lambda: self.holds_taken > taken, timeout)
            if not held:
                self.hold_at = None
            return held

    def hold_answer(self, record):
        """An Event to wait on until `record`, read whole, is released."""
        with self.changed:
            released = threading.Event()
            self.held.append((record, released))
            return released

    def release(self):
        """Let every request held go (one held mid-body is reset, with
        status 0), once each is recorded as answered; how many there were."""
        with self.changed:
            self.hold_at = None
            held, self.held = self.held, []
            for _, released in held:
                released.set()
            self.changed.wait_for(
                lambda: all(record["status"] is not None for record, _ in held), MAX_WAIT_SECONDS
            )
            return len(held)

    def answered(self, record, status):
        with self.changed:
            record["status"] = status
            self.changed.notify_all()

    def clean(self, empty_storage, wait=0):
        """Clear the rules and records and empty the storage, unless a request
        is in flight after up to `wait` seconds; the count in flight."""

        def in_flight():
            return sum(1 for record in self.records if record.get("status") is None)

        with self.changed:
            self.changed.wait_for(lambda: in_flight() == 0, wait)
            count = in_flight()
            if count:
                return count
            empty_storage()
            self.rules = []
            self.records = []
            self.hold_at = None
            self.earlier_signatures |= self.signatures
            self.signatures = set()
            self.generation += 1
            self.changed.notify_all()
            return 0

    def presigned(self, url):
        """Note the signature of `url`, just presigned."""
        signature = signature_of(urllib.parse.urlsplit(url).query)
        with self.changed:
            self.signatures.add(signature)

    def is_earlier_tests_locked(self, query):
        """Whether a request with `query` was presigned before the last clean
        only (the same URL presigned in the same second since is this test's).
        The caller holds `changed`."""
        signature = signature_of(query)
        return signature in self.earlier_signatures and signature not in self.signatures

    def snapshot(self):
        with self.changed:
            return [dict(record, query=dict(record["query"])) for record in self.records]

    def wait(self, operation, count, timeout, received=False, body_bytes=0):
        """Block until `count` records of `operation` (any, if None) are answered,
        or with `received`, have arrived (answered or not), and `body_bytes`
        body bytes have arrived in all the records."""

        def answered_count():
            return sum(
                1
                for record in self.records
                if (received or record["status"] is not None)
                and (operation is None or record["operation"] == operation)
            )

        def arrived():
            return sum(record["bytes"] for record in self.records)

        with self.changed:
            ok = self.changed.wait_for(
                lambda: answered_count() >= count and arrived() >= body_bytes, timeout
            )
            return ok, answered_count()


class Handler(BaseHTTPRequestHandler):
    """Presign, control and proxy endpoints; one instance per connection."""

    protocol_version = "HTTP/1.1"  # keep-alive; every answer has a Content-Length
    server_version = "s3-backend-fixture"

    # -- plumbing ----------------------------------------------------------

    def log_message(self, format, *args):
        pass  # keep the test output quiet

    # "Expect: 100-continue" is answered "100 Continue" at once, as S3 does
    # (BaseHTTPRequestHandler's own handle_expect_100); a request without
    # it just sends its body.

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

    def dispatch(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/presign" or path.startswith("/_control/"):
            try:
                self.handle_local(path)
            except Exception as error:  # a fixture bug: answer it, do not drop
                self.send_json(500, {"error": f"{type(error).__name__}: {error}"}, close=True)
        else:
            self.handle_proxy()

    def send_body(self, status, body, content_type, close=False, reason=None, headers=()):
        self.send_response(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def send_json(self, status, value, close=False):
        self.send_body(status, json.dumps(value).encode(), "application/json", close=close)

    def content_length(self):
        return as_int(self.headers.get("Content-Length"))

    # -- presign and control endpoints ---------------------------------------

    def handle_local(self, path):
        if "Transfer-Encoding" in self.headers:
            self.send_json(400, {"error": "Transfer-Encoding is not supported"}, close=True)
            return
        body = self.rfile.read(self.content_length() or 0)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        state = self.server.state
        route = (self.command, path)

        if route == ("POST", "/presign"):
            self.presign(body)
        elif route == ("POST", "/_control/rules"):
            try:
                rules = json.loads(body or b"[]")
                if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
                    raise ValueError("rules must be a JSON list of objects")
            except ValueError as error:
                self.send_json(400, {"error": str(error)})
                return
            state.set_rules(rules)
            self.send_json(200, {"ok": True})
        elif route == ("POST", "/_control/reset"):
            state.reset()
            self.send_json(200, {"ok": True})
        elif route == ("POST", "/_control/clean"):
            in_flight = state.clean(self.server.empty_storage, float(query.get("wait", 0)))
            if in_flight:
                self.send_json(409, {"inFlight": in_flight})
            else:
                self.send_json(200, {"ok": True, "generation": state.generation})
        elif route == ("GET", "/_control/requests"):
            self.send_json(200, state.snapshot())
        elif route == ("GET", "/_control/object"):
            self.send_json(200, self.server.object_info(query.get("key", "")))
        elif route == ("GET", "/_control/uploads"):
            self.send_json(200, self.server.list_uploads())
        elif route == ("GET", "/_control/parts"):
            self.send_json(
                200, self.server.list_parts(query.get("key", ""), query.get("uploadId", ""))
            )
        elif route == ("GET", "/_control/wait"):
            count = as_int(query.get("count"))
            count = 1 if count is None else count
            try:
                timeout = min(max(float(query.get("timeout", "10")), 0.0), MAX_WAIT_SECONDS)
            except ValueError:
                timeout = 10.0
            ok, seen = state.wait(
                query.get("operation"), count, timeout, query.get("received") == "1",
                as_int(query.get("bytes")) or 0,
            )
            self.send_json(200, {"ok": ok, "count": seen})
        elif route == ("GET", "/_control/hold"):
            try:
                timeout = min(max(float(query.get("timeout", "10")), 0.0), MAX_WAIT_SECONDS)
            except ValueError:
                timeout = 10.0
            held = state.hold(as_int(query.get("bytes")) or 0, timeout)
            self.send_json(200, {"held": held})
        elif route == ("POST", "/_control/release"):
            self.send_json(200, {"released": state.release()})
        else:
            self.send_json(404, {"error": f"no endpoint {self.command} {path}"})

    def presign(self, body):
        try:
            request = json.loads(body or b"{}")
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as error:
            self.send_json(400, {"error": f"bad JSON: {error}"})
            return
        operation = request.get("operation")
        # S3's action names ("UploadPart") are accepted as well as ours.
        if isinstance(operation, str) and operation[:1].isupper():
            operation = operation[0].lower() + operation[1:]
        if operation not in PRESIGN_OPERATIONS:
            self.send_json(400, {"error": f"unknown operation {operation!r}"})
            return
        client_method, required = PRESIGN_OPERATIONS[operation]
        missing = [name for name in ("key",) + required if request.get(name) in (None, "")]
        if missing:
            self.send_json(400, {"error": f"{operation} needs {', '.join(missing)}"})
            return

        generation = request.get("generation")
        if generation is not None and generation != self.server.state.generation:
            # An earlier test's uploader, late: not this test's request.
            self.send_json(410, {"error": f"presigned for generation {generation}, not the current one"})
            return

        rule = self.server.state.take_rule(
            presign_operation=operation, partNumber=request.get("partNumber")
        )
        if rule is not None and "status" in rule:
            status = int(rule["status"])
            message = rule.get("message", f"presign refused for {operation}")
            self.send_json(status, {"error": message})
            return

        # putObject: ContentType is deliberately not signed, so any is accepted.
        params = {"Bucket": BUCKET, "Key": str(request["key"])}
        try:
            if "uploadId" in required:
                params["UploadId"] = str(request["uploadId"])
            if operation == "uploadPart":
                params["PartNumber"] = int(request["partNumber"])
            if operation in ("putObject", "uploadPart") and request.get("contentMD5"):
                params["ContentMD5"] = str(request["contentMD5"])
            if operation == "listParts":
                if request.get("partNumberMarker") is not None:
                    params["PartNumberMarker"] = int(request["partNumberMarker"])
                if request.get("maxParts") is not None:
                    params["MaxParts"] = int(request["maxParts"])
            expires_in = int(request.get("expiresIn") or 3600)
        except (TypeError, ValueError) as error:
            self.send_json(400, {"error": f"bad parameter: {error}"})
            return
        url = self.server.presigner.generate_presigned_url(
            client_method, Params=params, ExpiresIn=expires_in
        )
        self.server.state.presigned(url)
        self.send_json(200, {"url": url})

    # -- the proxy -------------------------------------------------------------

    def handle_proxy(self):
        """Record a request for the bucket, then handle it (see proxy())."""
        split = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        prefix = f"/{BUCKET}/"
        key = urllib.parse.unquote(split.path[len(prefix):]) if split.path.startswith(prefix) else None
        length = self.content_length()
        record = {
            "method": self.command,
            "path": split.path,
            "key": key,
            "query": query,
            "partNumber": as_int(query.get("partNumber")),
            "uploadId": query.get("uploadId"),
            "operation": infer_operation(self.command, query),
            "bytes": 0,
            "status": None,
            "chunked": "Transfer-Encoding" in self.headers,
            "contentLength": length,
            "contentMD5": self.headers.get("Content-MD5"),
            "expect": self.headers.get("Expect"),
            "bodyMD5": None,
        }
        if not self.server.state.add_record(record, split.query):
            # Sent late by an earlier test's uploader: not this test's.
            self.send_body(410, s3_error_xml("Gone", "presigned for an earlier test"),
                           "application/xml", close=True)
            return
        try:
            self.proxy(record, length or 0)
        except Exception as error:  # a fixture bug: answer it, never leave it pending
            if record["status"] is None:
                message = f"s3_backend.py: {type(error).__name__}: {error}"
                self.answer(record, 500, s3_error_xml("InternalError", message),
                            "application/xml", close=True)

    def proxy(self, record, length):
        """Refuse, fail, drop or forward one request, as the rules say."""
        state = self.server.state
        if record["chunked"]:
            self.answer(record, 400, b"Transfer-Encoding is not supported\n", "text/plain", close=True)
            return

        rule = state.take_rule(
            operation=record["operation"],
            partNumber=record["partNumber"],
            method=self.command,
            key=record["key"],
        )

        if rule is not None and "dropAfter" in rule:
            self.read_body(record, min(int(rule["dropAfter"]), length))
            self.drop_connection()
            state.answered(record, 0)
            return

        body = self.read_body(record, length)
        if body is None:  # the client went away mid-body
            self.close_connection = True
            state.answered(record, 0)
            return

        corrupt = rule.get("corrupt") if rule is not None else None
        if corrupt is True and body:
            body[len(body) // 2] ^= 0x01
        record["bodyMD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
        refusal = content_md5_refusal(record["contentMD5"], record["bodyMD5"])
        if refusal is not None:
            code, message = refusal
            self.answer(record, 400, s3_error_xml(code, message), "application/xml")
            return

        if rule is not None and "holdFor" in rule:
            # Keep the request in flight: a part that is still being sent
            # when its uploader is killed.
            threading.Event().wait(min(float(rule["holdFor"]), 30.0))

        if rule is not None and rule.get("hold"):
            # In flight until the test lets it go (POST /_control/release).
            state.hold_answer(record).wait(HOLD_LIMIT_SECONDS)

        if rule is not None and "status" in rule:
            status = int(rule["status"])
            code = rule.get("code") or default_error_code(status)
            message = rule.get("message") or f"injected by the test ({code})"
            self.answer(record, status, s3_error_xml(code, message), "application/xml")
            return

        if corrupt == "stored" and body:
            body[len(body) // 2] ^= 0x01
        self.forward(
            record, body,
            drop_headers=("content-md5",) if corrupt == "stored" else (),
            kms=rule is not None and bool(rule.get("kms")),
        )

    def read_body(self, record, count):
        """Read `count` body bytes into one buffer, counting them as they arrive.

        Returns the bytes, or None if the client closed or reset early.
        """
        buffer = bytearray(count)
        view = memoryview(buffer)
        received = 0
        try:
            while received < count:
                n = self.rfile.readinto(view[received:received + min(CHUNK, count - received)])
                if not n:
                    return None
                received += n
                released = self.server.state.add_bytes(record, n, received < count)
                if released is not None:
                    # Held (GET /_control/hold) until released: then reset.
                    released.wait(HOLD_LIMIT_SECONDS)
                    self.drop_connection()
                    return None
        except OSError:
            return None
        finally:
            view.release()
        return buffer

    def drop_connection(self):
        """Reset the connection without answering (a failure mid-request)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def answer(self, record, status, body, content_type, close=False, reason=None, headers=()):
        """Mark the record answered, then answer the client (0 if the write
        failed): a client that has its answer finds its record answered."""
        self.server.state.answered(record, status)
        try:
            self.send_body(status, body, content_type, close=close, reason=reason, headers=headers)
        except OSError:
            self.close_connection = True
            self.server.state.answered(record, 0)

    def forward(self, record, body, drop_headers=(), kms=False):
        """Send the request on to moto and relay its answer (without the
        request headers named in `drop_headers`; with `kms`, as S3 answers
        for an object encrypted with a KMS key)."""
        host, port = self.server.moto_address
        connection = http.client.HTTPConnection(host, port, timeout=60)
        try:
            # The Host header is relayed as the client sent it: the signature covers it.
            connection.putrequest(
                self.command, self.path, skip_host=True, skip_accept_encoding=True
            )
            for name, value in self.headers.items():
                lowered = name.lower()
                if lowered in HOP_BY_HOP or lowered.startswith("proxy-") or lowered == "content-length":
                    continue
                if lowered in drop_headers:
                    continue
                if lowered == "content-type" and is_form_content_type(value):
                    value = "application/octet-stream"
                connection.putheader(name, value)
            if body or self.command in ("PUT", "POST"):
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body if body else None)
            response = connection.getresponse()
            answer = response.read()
            headers = [
                (name, value)
                for name, value in response.getheaders()
                if name.lower() not in HOP_BY_HOP
                and not name.lower().startswith("proxy-")
                and name.lower() not in ("content-length", "content-type", "date", "server")
            ]
            if kms:
                # An ETag that is no MD5: what S3 gives an object encrypted
                # with a KMS key.
                headers = [(name, value) for name, value in headers if name.lower() != "etag"]
                headers.append(("ETag", '"' + hashlib.md5(b"kms" + bytes(body)).hexdigest() + '"'))
                headers.append(("x-amz-server-side-encryption", "aws:kms"))
            content_type = response.getheader("Content-Type")
            if self.command == "HEAD":
                # A HEAD answer states the length of the body a GET would have.
                length = response.getheader("Content-Length")
                if length is not None:
                    headers.append(("Content-Length", length))
                self.head_answer(record, response.status, response.reason, content_type, headers)
                return
            self.answer(
                record, response.status, answer, content_type,
                reason=response.reason, headers=headers,
            )
        except OSError as error:  # moto unreachable or timed out
            self.answer(record, 502, s3_error_xml("BadGateway", str(error)), "application/xml")
        finally:
            connection.close()

    def head_answer(self, record, status, reason, content_type, headers):
        """As `answer`, for a HEAD: the record is answered before the client is."""
        self.server.state.answered(record, status)
        try:
            self.send_response(status, reason)
            for name, value in headers:
                self.send_header(name, value)
            if content_type:
                self.send_header("Content-Type", content_type)
            if not any(name.lower() == "content-length" for name, _ in headers):
                self.send_header("Content-Length", "0")
            self.end_headers()
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            self.server.state.answered(record, 0)


class Backend(ThreadingHTTPServer):
    """The HTTP server, holding the shared state and the boto3 clients."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, moto_address):
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = State()
        self.moto_address = moto_address
        self.port = self.server_address[1]
        self.presigner = s3_client(f"http://127.0.0.1:{self.port}")
        self.moto = s3_client(f"http://{moto_address[0]}:{moto_address[1]}")

    def handle_error(self, request, client_address):
        # A client killed mid-request (the outbox's kill tests do it on
        # purpose) resets its connection: not a fixture error to print.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)

    def object_info(self, key):
        try:
            response = self.moto.get_object(Bucket=BUCKET, Key=key)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404"):
                return {"exists": False, "size": 0, "sha256": "", "etag": ""}
            raise
        digest = hashlib.sha256()
        size = 0
        stream = response["Body"]
        for chunk in iter(lambda: stream.read(1024 * 1024), b""):
            digest.update(chunk)
            size += len(chunk)
        return {
            "exists": True,
            "size": size,
            "sha256": digest.hexdigest(),
            "etag": response.get("ETag", ""),
        }

    def empty_storage(self):
        """Reset moto (every object, multipart upload and key it holds) and
        create the bucket again."""
        host, port = self.moto_address
        connection = http.client.HTTPConnection(host, port, timeout=10)
        try:
            connection.request("POST", "/moto-api/reset")
            connection.getresponse().read()
        finally:
            connection.close()
        self.moto.create_bucket(Bucket=BUCKET)

    def list_uploads(self):
        response = self.moto.list_multipart_uploads(Bucket=BUCKET)
        uploads = [
            {"key": upload["Key"], "uploadId": upload["UploadId"]}
            for upload in response.get("Uploads", [])
        ]
        return {"uploads": uploads}

    def list_parts(self, key, upload_id):
        parts = []
        marker = 0
        try:
            while True:
                response = self.moto.list_parts(
                    Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumberMarker=marker
                )
                parts += [
                    {"partNumber": part["PartNumber"], "size": part["Size"], "etag": part["ETag"]}
                    for part in response.get("Parts", [])
                ]
                if not response.get("IsTruncated"):
                    break
                marker = int(response["NextPartNumberMarker"])
        except ClientError as error:
            return {"parts": [], "error": error.response.get("Error", {}).get("Code", "Unknown")}
        return {"parts": parts}


def main():
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = REGION
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    moto_address = moto.get_host_and_port()

    backend = Backend(moto_address)
    backend.moto.create_bucket(Bucket=BUCKET)
    threading.Thread(target=backend.serve_forever, name="backend", daemon=True).start()

    stop = threading.Event()
    # The signal handler only flips a flag: taking the Event's lock inside a
    # handler could deadlock against the main thread's own wait on it.
    terminated = []
    for number in (signal.SIGTERM, signal.SIGINT):  # SIGINT: Ctrl-C, run by hand
        signal.signal(number, lambda signum, frame: terminated.append(signum))

    def watch_stdin():
        try:
            while sys.stdin.buffer.read1(4096):
                pass
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, name="stdin", daemon=True).start()

    print(f"READY {backend.port}", flush=True)

    while not terminated and not stop.wait(0.2):
        pass

    # Nothing is kept: the process ends at once, and the system closes its
    # sockets. (Shutting moto's and the backend's servers down in turn took
    # about a second, each waiting for its polling loop; every S3 test paid
    # it, blocking a thread of the test process while it waited.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
