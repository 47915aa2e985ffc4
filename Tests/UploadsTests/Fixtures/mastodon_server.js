#!/usr/bin/env node
/**
 * A Mastodon-compatible server for UploadsTests, on Node's built-in `http`
 * module only (no npm packages), following the contract of Mastodon's
 * documented API for posting with media:
 *
 *   POST /api/v2/media      multipart/form-data: `file` (required),
 *                           `description` (optional, at most 1500
 *                           characters). An image is ready at once: 200
 *                           with its attachment, `url` set. A video is
 *                           processed: 202 with `url` null.
 *   GET  /api/v1/media/:id  206 while the medium is processed, 200 once it
 *                           is ready (a video is ready at its
 *                           PROCESSING_POLLS-th question), 404 unknown.
 *   POST /api/v1/statuses   JSON {status, media_ids}: 422 with more than
 *                           4 media ("Cannot attach more than 4 files"),
 *                           an unknown medium, or one not yet processed
 *                           ("Cannot attach files that have not finished
 *                           processing. Try again in a moment!"); 200 with
 *                           the status. An `Idempotency-Key` already seen
 *                           for the token gives the status it created, and
 *                           creates none.
 *
 * Every request needs `Authorization: Bearer <TOKEN>`: 401 {"error": "The
 * access token is invalid"} otherwise. Errors are JSON {"error": "..."}, as
 * Mastodon's are. Forms are parsed by Node's own `Request.formData()`
 * (undici's parser: it refuses LF-only lines, an unquoted or reordered
 * Content-Disposition, backslash-escaped quotes), which the server answers
 * 400 {"error": "bad form: ..."}; a request Node's HTTP parser refuses for
 * bad framing is answered 400 and listed in the state's `errors`.
 *
 * Test endpoints:
 *   GET  /_state   {media, statuses, requests, errors}: every medium
 *                  ({id, type, filename, contentType, description, size,
 *                  sha256, questions, ready}), every status ({id, url,
 *                  text, mediaIds, idempotencyKey}), every request
 *                  ({method, path, status, bodyBytes, headerBytes,
 *                  idempotencyKey}) and every framing error.
 *   GET  /_wait_for?bytes=N&ended=M&timeout=S
 *                  waits (up to S seconds, at most 10) until N body bytes
 *                  have arrived in all and M requests were answered, and
 *                  returns {ok, bytes, ended}: a moment to act on
 *   POST /_control JSON {"fail": {"path": "/api/v1/statuses", "status":
 *                  503, "times": 1}} answers the next `times` requests to
 *                  the path with that status (answered 204; a 429 with
 *                  Mastodon's X-RateLimit-* headers, its limit starting
 *                  over a minute later); {"after":
 *                  {"path": ..., "status": ..., "times": ...}} does the
 *                  same after the request's work is done (a lost answer).
 *
 * Environment: TOKEN (default "s3cret"), PROCESSING_POLLS (default 2),
 * MAX_MEDIA_BYTES (default 64 MiB; a larger file is answered 413 {"error":
 * "File is too large"}). Listens on 127.0.0.1 on a free port and prints the
 * port alone on its first stdout line; exits when its standard input ends
 * or on SIGTERM.
 */
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const serve = require('./serve');

const TOKEN = process.env.TOKEN ?? 's3cret';
const PROCESSING_POLLS = Number(process.env.PROCESSING_POLLS ?? 2);
const MAX_MEDIA_BYTES = Number(process.env.MAX_MEDIA_BYTES ?? 64 * 1024 * 1024);
const MAX_MEDIA_PER_STATUS = 4;
const BODY_LIMIT = 128 * 1024 * 1024;

const media = new Map(); // id -> medium
const statuses = [];
const byIdempotencyKey = new Map(); // token + key -> status
const requests = [];
const errors = [];
const failures = []; // {path, status, times, after}
let nextId = 100;
let bytesArrived = 0;
const waiters = new Set(); // pending GET /_wait_for: {check()}

function send(res, record, status, value) {
  const bytes = Buffer.from(JSON.stringify(value), 'utf8');
  record.status = status;
  for (const waiter of [...waiters]) waiter.check();
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', bytes.length);
  res.end(bytes);
}


function error(res, record, status, message) {
  // Mastodon's rate limit: no Retry-After, the time its limit starts over
  // (Rails' iso8601(6)), a minute from now here. The Date header is read
  // from the same moment: Node's own is cached for a second and renewed
  // by a timer, so an answer written in the loop's turn that crosses a
  // second still carries the second before (measured: 1.005 s behind).
  if (status === 429) {
    const now = Date.now();
    res.setHeader('Date', new Date(now).toUTCString());
    res.setHeader('X-RateLimit-Limit', '300');
    res.setHeader('X-RateLimit-Remaining', '0');
    res.setHeader('X-RateLimit-Reset', new Date(now + 60_000).toISOString().replace('Z', '000Z'));
  }
  send(res, record, status, { error: message });
}

function readBody(req, callback) {
  const parts = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    bytesArrived += chunk.length;
    for (const waiter of [...waiters]) waiter.check();
    if (size <= BODY_LIMIT) parts.push(chunk);
  });
  req.on('end', () => callback(size <= BODY_LIMIT ? Buffer.concat(parts) : null, size));
  req.on('error', () => {});
}

function attachment(medium) {
  return {
    id: medium.id,
    type: medium.type,
    url: medium.ready ? `http://127.0.0.1/media/${medium.id}/${encodeURIComponent(medium.filename)}` : null,
    preview_url: null,
    description: medium.description,
  };
}

/** A failure rule for `path` that applies now, counted down. */
function failureFor(path, after) {
  const rule = failures.find((f) => f.path === path && f.times > 0 && !!f.after === after);
  if (rule) rule.times -= 1;
  return rule;
}

async function postMedia(req, reply, body) {
  const error = (status, message) => reply(status, { error: message });
  if (!/^multipart\/form-data\b/i.test(req.headers['content-type'] ?? '')) {
    return error(422, 'Validation failed: File can\'t be blank');
  }
  let form;
  try {
    form = await new Request('http://127.0.0.1/', {
      method: 'POST',
      headers: { 'content-type': req.headers['content-type'] },
      body,
    }).formData();
  } catch (err) {
    return error(400, `bad form: ${err.message}`);
  }
  const file = form.get('file');
  if (file === null || typeof file === 'string') return error(422, 'Validation failed: File can\'t be blank');
  const description = form.get('description');
  if (typeof description === 'string' && description.length > 1500) {
    return error(422, 'Validation failed: Description is too long (maximum is 1500 characters)');
  }
  const bytes = Buffer.from(await file.arrayBuffer());
  if (bytes.length > MAX_MEDIA_BYTES) return error(413, 'File is too large');
  const type = file.type.startsWith('video/') ? 'video' : file.type.startsWith('image/') ? 'image' : null;
  if (type === null) return error(422, 'Validation failed: File content type is invalid');
  const medium = {
    id: String(nextId++),
    type,
    filename: file.name,
    contentType: file.type,
    description: typeof description === 'string' ? description : null,
    size: bytes.length,
    sha256: crypto.createHash('sha256').update(bytes).digest('hex'),
    questions: 0,
    ready: type === 'image',
  };
  media.set(medium.id, medium);
  reply(medium.ready ? 200 : 202, attachment(medium));
}

function getMedia(reply, id) {
  const error = (status, message) => reply(status, { error: message });
  const medium = media.get(id);
  if (!medium) return error(404, 'Record not found');
  medium.questions += 1;
  if (medium.questions >= PROCESSING_POLLS) medium.ready = true;
  reply(medium.ready ? 200 : 206, attachment(medium));
}

function postStatus(req, reply, body) {
  const error = (status, message) => reply(status, { error: message });
  let value;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return error(400, 'bad JSON');
  }
  const key = req.headers['idempotency-key'];
  if (key !== undefined && byIdempotencyKey.has(TOKEN + key)) {
    return reply(200, byIdempotencyKey.get(TOKEN + key).answer);
  }
  const ids = Array.isArray(value.media_ids) ? value.media_ids.map(String) : [];
  if (ids.length > MAX_MEDIA_PER_STATUS) return error(422, 'Cannot attach more than 4 files');
  const attached = ids.map((id) => media.get(id));
  if (attached.some((m) => m === undefined)) return error(422, 'Validation failed: Media not found');
  if (attached.some((m) => !m.ready)) {
    return error(422, 'Cannot attach files that have not finished processing. Try again in a moment!');
  }
  if (typeof value.status !== 'string' || (value.status === '' && ids.length === 0)) {
    return error(422, 'Validation failed: Text can\'t be blank');
  }
  const id = String(nextId++);
  const status = {
    id,
    url: `http://127.0.0.1/@tester/${id}`,
    text: value.status,
    mediaIds: ids,
    idempotencyKey: key ?? null,
    answer: {
      id,
      url: `http://127.0.0.1/@tester/${id}`,
      content: `<p>${value.status}</p>`,
      media_attachments: attached.map(attachment),
    },
  };
  statuses.push(status);
  if (key !== undefined) byIdempotencyKey.set(TOKEN + key, status);
  reply(200, status.answer);
}

function handle(req, res) {
  res.on('error', () => {});
  req.on('error', () => {});
  const path = req.url.split(/[?#]/, 1)[0];
  let headerBytes = `${req.method} ${req.url} HTTP/1.1\r\n`.length + 2;
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    headerBytes += Buffer.byteLength(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`);
  }
  if (path === '/_state') {
    req.resume();
    const state = { media: [...media.values()], statuses, requests, errors };
    const bytes = Buffer.from(JSON.stringify(state));
    res.setHeader('Content-Type', 'application/json');
    res.setHeader('Content-Length', bytes.length);
    return res.end(bytes);
  }
  if (path === '/_wait_for') {
    req.resume();
    const query = new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '');
    const bytes = Number(query.get('bytes') ?? 0);
    const ended = Number(query.get('ended') ?? 0);
    const limit = Math.min(Math.max(Number(query.get('timeout') ?? 10), 0), 10) * 1000;
    const answered = () => requests.filter((r) => r.status !== 0).length;
    const reached = () => bytesArrived >= bytes && answered() >= ended;
    const waiter = {
      check(timedOut = false) {
        if (!timedOut && !reached()) return;
        clearTimeout(timer);
        waiters.delete(waiter);
        const body = Buffer.from(JSON.stringify({ ok: reached(), bytes: bytesArrived, ended: answered() }));
        if (!res.destroyed && !res.headersSent) {
          res.setHeader('Content-Type', 'application/json');
          res.setHeader('Content-Length', body.length);
          res.end(body);
        }
      },
    };
    const timer = setTimeout(() => waiter.check(true), limit);
    waiters.add(waiter);
    res.on('close', () => {
      clearTimeout(timer);
      waiters.delete(waiter);
    });
    return waiter.check();
  }
  if (path === '/_control') {
    return readBody(req, (body) => {
      try {
        const value = JSON.parse(body.toString('utf8'));
        for (const name of ['fail', 'after']) {
          if (value[name]) failures.push({ ...value[name], times: value[name].times ?? 1, after: name === 'after' });
        }
        res.statusCode = 204;
        res.end();
      } catch (err) {
        res.statusCode = 400;
        res.end(String(err.message));
      }
    });
  }
  const record = {
    method: req.method,
    path,
    status: 0,
    bodyBytes: 0,
    headerBytes,
    idempotencyKey: req.headers['idempotency-key'] ?? null,
  };
  requests.push(record);
  readBody(req, (body, size) => {
    record.bodyBytes = size;
    if (body === null) return error(res, record, 413, 'File is too large');
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return error(res, record, 401, 'The access token is invalid');
    const failure = failureFor(path, false);
    if (failure) return error(res, record, failure.status, `injected ${failure.status}`);
    // A rule for after the work: the work is done, its answer replaced.
    const lost = failureFor(path, true);
    const reply = (status, value) =>
      lost
        ? error(res, record, lost.status, `injected ${lost.status} after the work was done`)
        : send(res, record, status, value);
    const mediaPath = path.match(/^\/api\/v1\/media\/([^/]+)$/);
    if (req.method === 'POST' && path === '/api/v2/media') {
      return postMedia(req, reply, body).catch((err) => error(res, record, 500, String(err?.message ?? err)));
    }
    if (req.method === 'GET' && mediaPath) return getMedia(reply, decodeURIComponent(mediaPath[1]));
    if (req.method === 'POST' && path === '/api/v1/statuses') return postStatus(req, reply, body);
    error(res, record, 404, 'Not found');
  });
}

const server = http.createServer({ keepAliveTimeout: 60_000, headersTimeout: 60_000, requestTimeout: 300_000 }, handle);

server.on('clientError', (err, socket) => {
  const code = String(err.code ?? '');
  if (code.startsWith('HPE_') && code !== 'HPE_INVALID_EOF_STATE') {
    errors.push({ code: err.code, reason: err.reason || err.message });
    if (socket.writable) {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
  }
  socket.destroy();
});

serve(server);
