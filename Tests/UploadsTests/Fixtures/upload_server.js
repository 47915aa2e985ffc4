#!/usr/bin/env node
/**
 * A strict upload server for UploadsTests, on Node's built-in `http` module
 * only (no npm packages).
 *
 * It exists because Node's HTTP parser (llhttp, in its default strict mode)
 * rejects bad request framing the way production servers and load balancers
 * do: a request with both Content-Length and Transfer-Encoding, a malformed
 * chunk size, a bad header line. A lenient fixture reads whatever it is
 * given, so an uploader that framed every file upload wrongly passed against
 * the Python one this replaces; against this server it gets a 400, and the
 * error is listed at GET /_errors.
 *
 * Listens on 127.0.0.1 on a free port and prints the port alone on its first
 * stdout line once listening; prints nothing else to stdout. Exits when its
 * standard input reaches EOF (the test that started it went away, even if it
 * crashed) or on SIGTERM.
 *
 * Stores what it receives (method, path, headers, byte count, SHA-256, MD5,
 * and the body itself when small); bodies are hashed as they stream in,
 * never held whole. PUT and POST (other than POST /_control) are uploads; a
 * success is answered 201 "stored" with ETag: "<the body's MD5, in hex>"
 * (quoted, as S3 does for a PutObject or UploadPart without KMS
 * encryption). Behaviour per path is set with
 * POST /_control (answered 204):
 *
 *   {"path": "/a.jpg", "status": 500, "times": 1}   answer 500 (the first N times, default 1)
 *   {"path": "/a.jpg", "delay": 2.0}                answer after 2 seconds
 *   {"path": "/a.jpg", "drop": true}                destroy the connection mid-body
 *                                                   (after at least 64 KiB was read)
 *   {"path": "/a.jpg", "hang_up": true}             read the whole body, then close the
 *                                                   connection without answering
 *   {"path": "/a.jpg", "read_delay": 0.01}          read the body slowly (pause that
 *                                                   long after each ~64 KiB)
 *   {"path": "/a.jpg", "hold_after": 65536}         hold the next upload of the path once
 *                                                   that many bytes of it arrived and more
 *                                                   are to come: stop reading it until
 *                                                   POST /_release (once)
 *   {"path": "/a.jpg", "headers": {"Retry-After": "2", "ETag": "\"abc\""}}
 *                                                   add headers to the answer (error
 *                                                   answers too; an ETag here replaces
 *                                                   the default one)
 *   {"path": "/a.jpg", "ok_status": 202}            the status of a success (default 201)
 *   {"path": "/a.jpg", "parse_form": false}         do not parse forms sent to this path
 *                                                   (a benchmark's, whose client must not wait
 *                                                   for the parser)
 *   {"path": "/a.jpg", "answer": "text", "answer_type": "application/json"}
 *                                                   the answer's body and content type
 *                                                   (default "stored" for a success,
 *                                                   "boom: the server failed on <path>"
 *                                                   for an error status; text/plain)
 *
 * A rule replaces any earlier rule for the same path; fields combine. A GET
 * of a path that has a rule is answered by it too, and recorded with the
 * uploads (method GET, no body): a status to poll, say
 * {"status": 206, "times": 2, "ok_status": 200, "answer": "{...}"}.
 *
 * A multipart/form-data upload is also parsed, once whole, by Node's own
 * `Request.formData()` (undici's parser, as strict as browsers' fetch: it
 * refuses LF-only lines, an unquoted or reordered Content-Disposition, and
 * backslash-escaped quotes). Its record gets `form`: {entries: [...]}, each
 * entry {name, value} for a field or {name, filename, type, size, sha256}
 * for a file, in the order sent; a success is answered 201 with that JSON
 * (unless a rule gives an answer). A form the parser refuses is answered
 * 400 "bad form: <why>", and its record gets `formError`.
 *
 * GET /_received      every upload received so far, as a JSON array of
 *                     {method, path, headers, rawHeaders, length, complete,
 *                      sha256, md5, body}; headers has lower-cased names, rawHeaders
 *                     is [name, value] pairs in wire order, body is a latin-1
 *                     string when length <= 64 KiB, else null
 * GET /_arriving     the uploads whose body is still arriving (or whose form
 *                     is being parsed), as /_received lists them: what a
 *                     test that ran out of time was waiting for
 * GET /_wait?path=P   waits (up to 10 s) until an upload of P has ended and
 *                     returns its records (404 with [] if none)
 * GET /_wait_for?bytes=N&ended=M[&timeout=S]
 *                     waits (up to S seconds, at most and by default 10)
 *                     until N body bytes of uploads have
 *                     arrived in all and M uploads have ended, and returns
 *                     {"ok", "bytes", "ended"} (ok false when the time ran
 *                     out): a moment in the middle of an upload, or just
 *                     after one, to act on
 * GET /_hold?bytes=N[&timeout=S]
 *                     holds the upload whose body is still arriving once N
 *                     body bytes of uploads have arrived in all (the one the
 *                     N-th byte is part of, or the next to send any if that
 *                     one's body ended there): the server stops reading it.
 *                     Answers {"held": true, "bytes"} once one is held, or
 *                     {"held": false, "bytes"} after S seconds (at most and by
 *                     default 10), when the hold is forgotten
 * POST /_release[?resume=1]
 *                     drops the connection of every upload held, without
 *                     reading the rest of its body (its record says complete:
 *                     false, with the bytes read), forgets the holds not yet
 *                     taken (a GET /_hold's, the rules'), and answers
 *                     {"released": N}. A test holds an upload, kills its
 *                     client and releases it: a kill in the middle of a body,
 *                     arranged rather than hoped for. (Bytes the killed client
 *                     had left in its kernel's buffers would still arrive on
 *                     this machine, and could end the body.) With resume=1,
 *                     the uploads held are read again instead: a client that
 *                     cancelled meanwhile ends its body short; one that did
 *                     not, sends the rest. An upload held for 30 s is dropped.
 * GET /_errors        every request the server refused for bad framing, as a
 *                     JSON array of {code, reason}: parse errors from Node's
 *                     parser (answered "400 Bad Request" with Connection: close,
 *                     then the connection is destroyed), and any request that
 *                     reached the handler with both Content-Length and
 *                     Transfer-Encoding (code "FRAMING", answered 400). A
 *                     request or header timeout is listed too (answered 408).
 *                     A client that goes away mid-request is not an error
 *                     here: its upload's record says complete: false.
 *
 * A request with Expect: 100-continue whose path has a rule with an error
 * status (times left) is answered at once, before its body is read, with
 * Connection: close: what a server that turns a request away on its
 * headers alone does. Its record has early: true and counts the body bytes
 * that came anyway (none, from a client that waits for "100 Continue").
 *   {"path": "/a.jpg", "refuse_expect": true}      answer any request with Expect:
 *                                                   100-continue "417 Expectation
 *                                                   Failed" at once, keeping the
 *                                                   connection (a server that
 *                                                   refuses expectations); its
 *                                                   record, early: true, is kept
 *                                                   once the answer went
 * Any other is answered "100 Continue", as Node does by itself, and goes on
 * as usual; its expect header is recorded like any other.
 */
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const serve = require('./serve');

const CHUNK = 64 * 1024; // drop after this much; pause after each this much
const SMALL = 64 * 1024; // bodies up to this size are kept in the record
const FORM_LIMIT = 64 * 1024 * 1024; // largest form parsed
const WAIT_LIMIT_MS = 10_000; // GET /_wait
const CONTROL_LIMIT = 1024 * 1024; // largest POST /_control body
const MAX_DELAY_S = 600; // longest delay or read_delay a rule may ask for

const received = []; // records of ended uploads, in the order they ended
const arriving = new Set(); // records of uploads whose body has not ended
const errors = []; // requests refused for bad framing
const rules = new Map(); // path -> rule
const waiters = new Set(); // pending GET /_wait: {path, done(found)}
let bytesArrived = 0; // body bytes of every upload, as they arrive
const progressWaiters = new Set(); // pending GET /_wait_for: {check()}
const HOLD_LIMIT_MS = 30_000; // an upload held and never released is dropped then
let pendingHold = null; // a GET /_hold not yet taken: {bytes, answer(held)}
const held = new Set(); // uploads held: {release()}

function answer(res, status, body, contentType, headers = {}) {
  const bytes = Buffer.from(body, 'utf8');
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Length', bytes.length);
  res.end(bytes);
}

function answerJSON(res, status, value) {
  answer(res, status, JSON.stringify(value), 'application/json');
}

/** The path of a request target, without query or fragment, as sent. */
function pathOf(target) {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    try {
      return new URL(target).pathname;
    } catch {
      return target;
    }
  }
  return target.split(/[?#]/, 1)[0];
}

function queryOf(target) {
  const at = target.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : target.slice(at + 1).split('#', 1)[0]);
}

function recordEnded(record) {
  arriving.delete(record);
  received.push(record);
  for (const waiter of [...waiters]) {
    if (waiter.path === record.path) waiter.done();
  }
  for (const waiter of [...progressWaiters]) waiter.check();
}

// MARK: - Control endpoints

/** Reads a small request body whole; calls back with (error, Buffer). */
function readSmallBody(req, callback) {
  const parts = [];
  let size = 0;
  let finished = false;
  const finish = (error, body) => {
    if (finished) return;
    finished = true;
    callback(error, body);
  };
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > CONTROL_LIMIT) {
      finish(new Error(`control body larger than ${CONTROL_LIMIT} bytes`));
      req.resume();
      return;
    }
    parts.push(chunk);
  });
  req.on('end', () => finish(null, Buffer.concat(parts)));
  req.on('close', () => finish(new Error('connection closed before the body ended')));
}

function isSeconds(value) {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_DELAY_S;
}

/** The rule in a POST /_control body, or throws with what is wrong with it. */
function parseRule(body) {
  const rule = JSON.parse(body.toString('utf8'));
  if (rule === null || typeof rule !== 'object' || Array.isArray(rule)) throw new Error('a rule is a JSON object');
  if (typeof rule.path !== 'string' || !rule.path.startsWith('/')) throw new Error('"path" must be a string starting with /');
  if (rule.status !== undefined && !(Number.isInteger(rule.status) && rule.status >= 100 && rule.status <= 999)) {
    throw new Error('"status" must be an integer from 100 to 999');
  }
  if (rule.times !== undefined && !Number.isInteger(rule.times)) throw new Error('"times" must be an integer');
  if (rule.ok_status !== undefined && !(Number.isInteger(rule.ok_status) && rule.ok_status >= 200 && rule.ok_status <= 299)) {
    throw new Error('"ok_status" must be an integer from 200 to 299');
  }
  if (rule.delay !== undefined && !isSeconds(rule.delay)) throw new Error(`"delay" must be 0...${MAX_DELAY_S} seconds`);
  if (rule.read_delay !== undefined && !isSeconds(rule.read_delay)) {
    throw new Error(`"read_delay" must be 0...${MAX_DELAY_S} seconds`);
  }
  if (rule.drop !== undefined && typeof rule.drop !== 'boolean') throw new Error('"drop" must be true or false');
  if (rule.hang_up !== undefined && typeof rule.hang_up !== 'boolean') {
    throw new Error('"hang_up" must be true or false');
  }
  if (rule.refuse_expect !== undefined && typeof rule.refuse_expect !== 'boolean') {
    throw new Error('"refuse_expect" must be true or false');
  }
  if (rule.answer !== undefined && typeof rule.answer !== 'string') throw new Error('"answer" must be a string');
  if (rule.parse_form !== undefined && typeof rule.parse_form !== 'boolean') {
    throw new Error('"parse_form" must be true or false');
  }
  if (rule.answer_type !== undefined && typeof rule.answer_type !== 'string') {
    throw new Error('"answer_type" must be a string');
  }
  if (rule.headers !== undefined) {
    if (rule.headers === null || typeof rule.headers !== 'object' || Array.isArray(rule.headers)) {
      throw new Error('"headers" must be an object of names to strings');
    }
    for (const [name, value] of Object.entries(rule.headers)) {
      if (typeof value !== 'string') throw new Error(`header ${name} must have a string value`);
      http.validateHeaderName(name);
      http.validateHeaderValue(name, value);
    }
  }
  return rule;
}

function control(req, res) {
  readSmallBody(req, (error, body) => {
    if (error) {
      if (!res.destroyed) answer(res, 400, `bad rule: ${error.message}`, 'text/plain');
      return;
    }
    let rule;
    try {
      rule = parseRule(body);
    } catch (err) {
      answer(res, 400, `bad rule: ${err.message}`, 'text/plain');
      return;
    }
    const { path, ...rest } = rule;
    rules.set(path, rest);
    res.statusCode = 204;
    res.end();
  });
}

function wait(req, res) {
  const path = queryOf(req.url).get('path') ?? '';
  const found = () => received.filter((r) => r.path === path);
  if (found().length > 0) {
    answerJSON(res, 200, found());
    return;
  }
  const waiter = {
    path,
    done() {
      clearTimeout(timer);
      waiters.delete(waiter);
      const records = found();
      if (!res.destroyed) answerJSON(res, records.length > 0 ? 200 : 404, records);
    },
  };
  const timer = setTimeout(() => waiter.done(), WAIT_LIMIT_MS);
  waiters.add(waiter);
  res.on('close', () => {
    clearTimeout(timer);
    waiters.delete(waiter);
  });
}

/** A wait's bound: its `timeout` in seconds, at most and by default 10. */
function limitOf(query) {
  const seconds = Number(query.get('timeout') ?? WAIT_LIMIT_MS / 1000);
  return Number.isFinite(seconds) ? Math.min(Math.max(seconds * 1000, 0), WAIT_LIMIT_MS) : WAIT_LIMIT_MS;
}

function waitFor(req, res) {
  const query = queryOf(req.url);
  const bytes = Number(query.get('bytes') ?? 0);
  const ended = Number(query.get('ended') ?? 0);
  const limit = limitOf(query);
  const reached = () => bytesArrived >= bytes && received.length >= ended;
  const waiter = {
    check(timedOut = false) {
      if (!timedOut && !reached()) return;
      clearTimeout(timer);
      progressWaiters.delete(waiter);
      if (!res.destroyed) answerJSON(res, 200, { ok: reached(), bytes: bytesArrived, ended: received.length });
    },
  };
  const timer = setTimeout(() => waiter.check(true), limit);
  progressWaiters.add(waiter);
  res.on('close', () => {
    clearTimeout(timer);
    progressWaiters.delete(waiter);
  });
  waiter.check();
}

function hold(req, res) {
  const query = queryOf(req.url);
  const bytes = Number(query.get('bytes') ?? 0);
  const limit = limitOf(query);
  pendingHold?.answer(false);
  let answered = false;
  const waiter = {
    bytes,
    answer(isHeld) {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (pendingHold === waiter) pendingHold = null;
      if (!res.destroyed) answerJSON(res, 200, { held: isHeld, bytes: bytesArrived });
    },
  };
  const timer = setTimeout(() => waiter.answer(false), limit);
  pendingHold = waiter;
  res.on('close', () => waiter.answer(false));
}

function release(req, res) {
  req.resume();
  const resume = queryOf(req.url).get('resume') === '1';
  pendingHold?.answer(false);
  for (const rule of rules.values()) delete rule.hold_after;
  const count = held.size;
  for (const upload of [...held]) upload.release(resume);
  answerJSON(res, 200, { released: count });
}

// MARK: - Uploads

/** The entries of a multipart/form-data body, as Node's fetch parses them. */
async function parseForm(contentType, body) {
  const request = new Request('http://127.0.0.1/', { method: 'POST', headers: { 'content-type': contentType }, body });
  const entries = [];
  for (const [name, value] of await request.formData()) {
    if (typeof value === 'string') {
      entries.push({ name, value });
    } else {
      const bytes = Buffer.from(await value.arrayBuffer());
      const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
      entries.push({ name, filename: value.name, type: value.type, size: bytes.length, sha256 });
    }
  }
  return { entries };
}

/** The record of an upload of `path` whose body has not come yet. */
function newRecord(req, path) {
  const rawHeaders = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
  return {
    method: req.method,
    path,
    headers: { ...req.headers },
    rawHeaders,
    length: 0,
    complete: false,
    sha256: '',
    md5: '',
    body: null,
  };
}

function upload(req, res) {
  const path = pathOf(req.url);
  // The rule as it is now; its "times" is counted down when answering.
  const rule = rules.get(path) ?? {};
  const record = newRecord(req, path);
  arriving.add(record);
  const digest = crypto.createHash('sha256');
  const md5 = crypto.createHash('md5');
  const small = [];
  let smallLength = 0;
  const isForm = rule.parse_form !== false && /^multipart\/form-data\b/i.test(req.headers['content-type'] ?? '');
  const form = []; // the whole body of a form, to parse once it ended
  let formLength = 0;
  let sincePause = 0; // bytes read since the last read_delay pause
  let ended = false;
  let pauseTimer = null;

  const end = (complete) => {
    if (ended) return;
    ended = true;
    clearTimeout(pauseTimer);
    record.complete = complete;
    record.sha256 = digest.digest('hex');
    record.md5 = md5.digest('hex');
    record.body = record.length <= SMALL ? Buffer.concat(small).toString('latin1') : null;
    const done = () => {
      recordEnded(record);
      if (complete) respond(req, res, path, rule, record);
    };
    if (!complete || !isForm) return done();
    if (formLength > FORM_LIMIT) {
      record.formError = `larger than ${FORM_LIMIT} bytes`;
      return done();
    }
    parseForm(req.headers['content-type'], Buffer.concat(form)).then(
      (parsed) => {
        record.form = parsed;
        done();
      },
      (error) => {
        record.formError = String(error?.message ?? error);
        done();
      },
    );
  };

  req.on('data', (chunk) => {
    if (ended) return;
    digest.update(chunk);
    md5.update(chunk);
    record.length += chunk.length;
    bytesArrived += chunk.length;
    for (const waiter of [...progressWaiters]) waiter.check();
    if (isForm && formLength <= FORM_LIMIT) {
      form.push(chunk);
      formLength += chunk.length;
    }
    if (smallLength < SMALL) {
      const kept = chunk.subarray(0, SMALL - smallLength);
      small.push(kept);
      smallLength += kept.length;
    }
    const length = Number(req.headers['content-length']);
    const byTest = pendingHold !== null && bytesArrived >= pendingHold.bytes;
    const byRule = rule.hold_after !== undefined && record.length >= rule.hold_after;
    if ((byTest || byRule) && !(record.length >= length)) {
      // Held (GET /_hold, or the rule's hold_after) until POST /_release.
      if (byTest) pendingHold.answer(true);
      else delete rule.hold_after;
      req.pause();
      const upload = {
        release(resume) {
          held.delete(upload);
          clearTimeout(timer);
          if (resume) return req.resume();
          end(false);
          req.socket.destroy();
        },
      };
      const timer = setTimeout(() => upload.release(false), HOLD_LIMIT_MS);
      held.add(upload);
      return;
    }
    if (rule.drop && record.length >= CHUNK) {
      end(false);
      req.socket.destroy();
      return;
    }
    sincePause += chunk.length;
    if (rule.read_delay && sincePause >= CHUNK) {
      // Reading slowly on request keeps an upload in flight long enough
      // for the cancellation test to cancel it midway. Socket reads come
      // in varying sizes, so pause once per whole 64 KiB read, like the
      // Python fixture's fixed-size reads.
      const pauses = Math.floor(sincePause / CHUNK);
      sincePause -= pauses * CHUNK;
      req.pause();
      pauseTimer = setTimeout(() => req.resume(), pauses * rule.read_delay * 1000);
    }
  });
  req.on('end', () => {
    if (rule.read_delay && sincePause > 0) {
      // The pause after the last, partial chunk, as for the others.
      pauseTimer = setTimeout(() => end(true), rule.read_delay * 1000);
    } else {
      end(true);
    }
  });
  // Closed before the body ended: the client went away, or the parser
  // refused the rest (see clientError).
  req.on('close', () => {
    if (!req.complete) end(false);
  });
  req.on('error', () => {});
}

function respond(req, res, path, rule, record) {
  const md5 = record.md5;
  if (rule.hang_up) {
    // What a proxy that gives up, or a keep-alive connection the server
    // closed just as it was reused, looks like to the client.
    req.socket.destroy();
    return;
  }
  const send = () => {
    if (res.destroyed || res.headersSent) return;
    // The rule the upload began with: a later rule for the path does not
    // change an upload already under way. Uploads under the same rule
    // share its count of "times".
    const times = rule.times ?? 1;
    const headers = { ...(rule.headers ?? {}) };
    const contentType = rule.answer_type ?? 'text/plain';
    if (rule.status && times > 0) {
      rule.times = times - 1;
      answer(res, rule.status, rule.answer ?? `boom: the server failed on ${path}`, contentType, headers);
      return;
    }
    if (record.formError !== undefined) {
      answer(res, 400, `bad form: ${record.formError}`, 'text/plain', headers);
      return;
    }
    if (!Object.keys(headers).some((name) => name.toLowerCase() === 'etag')) {
      headers.ETag = `"${md5}"`;
    }
    if (record.form !== undefined && rule.answer === undefined) {
      answer(res, rule.ok_status ?? 201, JSON.stringify(record.form), 'application/json', headers);
      return;
    }
    answer(res, rule.ok_status ?? 201, rule.answer ?? 'stored', contentType, headers);
  };
  if (rule.delay) {
    // Answering slowly on request is this fixture's job: the Swift test
    // that asks for it checks the uploader's timeout.
    const timer = setTimeout(send, rule.delay * 1000);
    res.on('close', () => clearTimeout(timer));
  } else {
    send();
  }
}

// MARK: - Server

function handle(req, res) {
  res.on('error', () => {});
  req.on('error', () => {});
  if (req.headers['content-length'] !== undefined && req.headers['transfer-encoding'] !== undefined) {
    // Node's strict parser refuses these before they get here; this is
    // the second line of defence (say, if run with --insecure-http-parser).
    errors.push({ code: 'FRAMING', reason: 'request has both Content-Length and Transfer-Encoding' });
    answer(res, 400, 'bad request: both Content-Length and Transfer-Encoding', 'text/plain', { Connection: 'close' });
    res.on('finish', () => req.socket.destroySoon());
    return;
  }
  const path = pathOf(req.url);
  if (req.method === 'POST' && path === '/_control') return control(req, res);
  if (req.method === 'GET' && path === '/_received') return answerJSON(res, 200, received);
  if (req.method === 'GET' && path === '/_arriving') return answerJSON(res, 200, [...arriving]);
  if (req.method === 'GET' && path === '/_errors') return answerJSON(res, 200, errors);
  if (req.method === 'GET' && path === '/_wait') return wait(req, res);
  if (req.method === 'GET' && path === '/_wait_for') return waitFor(req, res);
  if (req.method === 'GET' && path === '/_hold') return hold(req, res);
  if (req.method === 'POST' && path === '/_release') return release(req, res);
  if (req.method === 'PUT' || req.method === 'POST') return upload(req, res);
  if (req.method === 'GET' && rules.has(path)) return upload(req, res);
  req.resume();
  if (req.method === 'GET') return answer(res, 404, 'not found', 'text/plain');
  answer(res, 405, `method ${req.method} not allowed`, 'text/plain', { Allow: 'GET, PUT, POST' });
}

const server = http.createServer(
  {
    // Longer than Node's 5 s, so that an idle keep-alive connection is not
    // closed just as the client reuses it for a PUT; still bounded.
    keepAliveTimeout: 60_000,
    headersTimeout: 60_000,
    requestTimeout: 300_000,
  },
  handle,
);

// Expect: 100-continue (see the top): Node calls this in place of the
// request handler, and sends "100 Continue" only when told to.
server.on('checkContinue', (req, res) => {
  const path = pathOf(req.url);
  const rule = rules.get(path) ?? {};
  const times = rule.times ?? 1;
  const isUpload = req.method === 'PUT' || req.method === 'POST';
  const turnsAway = isUpload && rule.status >= 300 && times > 0;
  if (!rule.refuse_expect && !turnsAway) {
    res.writeContinue();
    handle(req, res);
    return;
  }
  res.on('error', () => {});
  req.on('error', () => {});
  const record = { ...newRecord(req, path), early: true };
  // Bytes the client sent without waiting.
  req.on('data', (chunk) => {
    record.length += chunk.length;
    bytesArrived += chunk.length;
    for (const waiter of [...progressWaiters]) waiter.check();
  });
  if (rule.refuse_expect) {
    // On a connection kept alive, as a strict server answers: the record
    // is kept once the answer went.
    res.on('finish', () => recordEnded(record));
    answer(res, 417, 'expectation failed', 'text/plain');
    return;
  }
  // The answer says Connection: close; the request itself never ends, so
  // the record is kept once the connection closes, with every byte that
  // came before.
  req.socket.once('close', () => recordEnded(record));
  rule.times = times - 1;
  const headers = { ...(rule.headers ?? {}), Connection: 'close' };
  answer(res, rule.status, rule.answer ?? `boom: the server failed on ${path}`, rule.answer_type ?? 'text/plain', headers);
});

server.on('clientError', (err, socket) => {
  const code = String(err.code ?? '');
  // A connection that ends mid-request (HPE_INVALID_EOF_STATE) is the
  // client going away, as when an upload is cancelled: its record says
  // complete: false, and it is not a framing error.
  const parseError = code.startsWith('HPE_') && code !== 'HPE_INVALID_EOF_STATE';
  const timeout = code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT';
  if (parseError || timeout) errors.push({ code: err.code, reason: err.reason || err.message });
  // A reset or a broken pipe is the client going away: nothing to answer.
  if ((parseError || timeout) && socket.writable) {
    const status = timeout ? '408 Request Timeout' : '400 Bad Request';
    const body = `${timeout ? 'request timeout' : 'bad request'}: ${err.code}: ${err.reason || err.message}\n`;
    socket.end(
      `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    socket.on('finish', () => socket.destroy());
    setTimeout(() => socket.destroy(), 1000).unref();
  } else {
    socket.destroy();
  }
});

serve(server);
