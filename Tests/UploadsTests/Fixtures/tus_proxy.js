'use strict';
/**
 * A tus server nobody here wrote, behind a counting proxy on Node's own
 * `http` module, for UploadsTests.
 *
 * TUS_SERVER names the server, from PyPI, pinned and installed by .ci/run:
 * `resumable-upload` (standard library only) or `tuspyserver` (FastAPI,
 * behind uvicorn, through tuspy_app.py). It runs as a child process on a
 * free port of 127.0.0.1, its files in a temporary folder; TUS_MAX_SIZE
 * sets its largest upload. Once it answers as a tus server, the proxy
 * listens and prints its own port (serve.js); a port another process took
 * before the child could bind it is traded for another. The child is
 * stopped when the proxy exits.
 *
 * Every request but /_* is forwarded, its body streamed as it arrives, and
 * recorded: {method, path, status, offset (the Upload-Offset sent),
 * answerOffset, checksum (the Upload-Checksum sent), metadata (the
 * Upload-Metadata sent), authorization, length (the Upload-Length sent),
 * location (the Location answered, on the proxy), bodyBytes (received from
 * the client), fault}.
 *
 * POST /_control {"fault": F, "method": M, "nth": N, "after": B} arms one
 * fault for the N-th request of method M from now (N = 1: the next):
 *  - "cut": forwards the first B bytes of its body, then drops both
 *    connections (a connection lost mid-body): the server's first, then,
 *    once the server holds those bytes (its HEAD says so, within 5
 *    seconds; with "settle": false, at once), the client's;
 *  - "corrupt": flips the bits of its body's first byte on the way (the
 *    server's checksum then refuses it);
 *  - "duplicate": forwards it twice, the second time once the first was
 *    answered, and answers the client with the second answer (a request
 *    sent again by the network);
 *  - "lose": forwards it, then drops the client's connection instead of
 *    answering (an answer lost on the way back).
 * POST /_control {"clear": true} forgets the faults armed and not met.
 * GET /_state answers {"requests": [...]}.
 * GET /_wait?method=M&from=N answers {"ok": true} once a request of method
 * M, the N-th or later, was answered (or its fault took effect),
 * {"ok": false} after 10 seconds.
 * GET /_wait_for?bytes=B&ended=E&timeout=S answers {"ok", "bytes",
 * "ended"} once B body bytes have reached the proxy and E requests were
 * answered in all, or after S seconds (at most 10).
 * GET /_hold?bytes=B&timeout=S holds the request whose body is still
 * arriving once B body bytes have reached the proxy in all (the one the
 * B-th byte is part of, or the next to send any if that one's body ended
 * there): the proxy stops reading it. Answers {"held": true} once one is
 * held, {"held": false} after S seconds (at most 10), the hold forgotten.
 * POST /_release drops the connections of every request held, without
 * reading the rest of its body: the server's first, then, once the server
 * holds what it was sent (its HEAD says so, within 5 seconds), the
 * client's; forgets a hold not yet taken; answers {"released": N}. A test
 * holds a request, kills its client and releases it: a kill in the middle
 * of a body, arranged rather than hoped for. (Bytes the killed client had
 * left in its kernel's buffers would still arrive on this machine, and
 * could end the body.) A request held for 30 s is dropped the same way.
 * GET /_stored?path=P answers {"size", "sha256"} of the upload at P as the
 * server stored it, or 404.
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const serve = require('./serve.js');

const kind = process.env.TUS_SERVER || 'resumable-upload';
const maxSize = process.env.TUS_MAX_SIZE || '';
const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'jobkit-tus-'));
const requests = [];
let faults = [];
let upstreamPort = 0;
/** A GET /_hold not yet taken: {bytes, answer(held)}. */
let pendingHold = null;
/** The requests held: {release(done)}. */
const held = new Set();
let waiters = [];
let child = null;
// The connections to the server, each kept for a second at most between
// requests. Node's own agent keeps them until the server closes them
// (uvicorn: after 5 s idle), and a request sent on one as the server
// closes it fails with no answer (ECONNRESET): it happened to a
// duplicate's second request, which takes the pool's other, older
// connection (the first's is not free again until after its answer's
// 'end' handlers). A socket's timeout ends only an idle one here.
const upstreamAgent = new http.Agent({ keepAlive: true, timeout: 1000 });

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

function startChild(port) {
  const args = kind === 'tuspyserver'
    ? [path.join(__dirname, 'tuspy_app.py'), String(port), path.join(folder, 'files'), maxSize]
    : ['-m', 'resumable_upload', 'serve', '--host', '127.0.0.1', '--port', String(port),
      '--upload-dir', path.join(folder, 'uploads'), '--db-path', path.join(folder, 'uploads.db'),
      '--enable-downloads', '--log-level', 'ERROR', ...(maxSize ? ['--max-size', maxSize] : [])];
  // Its errors come through the proxy rather than on the test's own
  // stream: a server left behind by a proxy killed with SIGKILL (whose
  // exit handler then never runs) would otherwise hold that stream open,
  // and `swift test` waited for its end for ever.
  const started = spawn('python3', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  started.stderr.on('data', (chunk) => process.stderr.write(chunk));
  child = started;
  started.on('exit', (code) => {
    if (child === started) process.stderr.write(`tus_proxy: ${kind} exited with ${code}\n`);
  });
}

/**
 * Resolves once the child answers OPTIONS as a tus server (with
 * Tus-Version), within 30 seconds. Rejects with `lostPort` set when the
 * port was not the child's: another process bound it between freePort's
 * probe and the child's start (a test's server, started at that moment),
 * and answered, or the child exited (it could not bind).
 */
function waitForChild(port) {
  const deadline = Date.now() + 30000;
  const started = child;
  return new Promise((resolve, reject) => {
    function lost(why) {
      const error = new Error(`${kind} lost port ${port}: ${why}`);
      error.lostPort = true;
      reject(error);
    }
    function probe() {
      if (started.exitCode !== null || started.signalCode !== null) return lost('it exited');
      const request = http.request({ host: '127.0.0.1', port, method: 'OPTIONS', path: '/files/' }, (answer) => {
        answer.resume();
        if (answer.headers['tus-version']) resolve();
        else lost('another server answered');
      });
      request.on('error', () => {
        if (Date.now() > deadline) reject(new Error(`${kind} did not start within 30 s`));
        else setTimeout(probe, 100);
      });
      request.end();
    }
    probe();
  });
}

/** Starts the child on a free port and resolves with the port once it
 * answers; a port lost to another process is traded for another, up to
 * five times. */
async function startChildOnFreePort() {
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    startChild(port);
    try {
      await waitForChild(port);
      return port;
    } catch (error) {
      const lost = child;
      child = null;
      lost.kill('SIGKILL');
      if (!error.lostPort || attempt === 5) throw error;
    }
  }
}

function stopChild() {
  const running = child;
  child = null;
  // At once: a server still answering a request when its folder goes
  // would print the error of each.
  if (running) running.kill('SIGKILL');
  fs.rmSync(folder, { recursive: true, force: true });
}

process.on('exit', stopChild);

/** The fault armed for this request, if any, taken out of the list. */
function takeFault(method) {
  for (const fault of faults) {
    if (fault.method === method) fault.nth -= 1;
  }
  const index = faults.findIndex((fault) => fault.nth === 0);
  if (index < 0) return null;
  const [fault] = faults.splice(index, 1);
  faults = faults.filter((other) => other.nth > 0);
  return fault;
}

/** Answers the waits that a request now answered ends. */
function noteAnswered() {
  waiters = waiters.filter((waiter) => {
    const later = requests.slice(waiter.from);
    if (!later.some((record) => record.method === waiter.method && record.status !== 0)) return true;
    clearTimeout(waiter.timer);
    json(waiter.response, 200, { ok: true });
    return false;
  });
}

function wait(query, response) {
  const waiter = { method: query.get('method'), from: Number(query.get('from') || 0), response };
  waiter.timer = setTimeout(() => {
    waiters = waiters.filter((other) => other !== waiter);
    json(response, 200, { ok: false });
  }, 10000);
  waiters.push(waiter);
  noteAnswered();
}

function bodyBytes() {
  return requests.reduce((sum, record) => sum + record.bodyBytes, 0);
}

function hold(query, response) {
  pendingHold?.answer(false);
  let answered = false;
  const waiter = {
    bytes: Number(query.get('bytes') || 0),
    answer(isHeld) {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (pendingHold === waiter) pendingHold = null;
      if (!response.destroyed) json(response, 200, { held: isHeld });
    },
  };
  const timer = setTimeout(() => waiter.answer(false), Math.min(Number(query.get('timeout') || 10), 10) * 1000);
  pendingHold = waiter;
  response.on('close', () => waiter.answer(false));
}

function release(response) {
  pendingHold?.answer(false);
  const releasing = [...held];
  let left = releasing.length;
  if (left === 0) return json(response, 200, { released: 0 });
  for (const request of releasing) {
    request.release(() => {
      left -= 1;
      if (left === 0) json(response, 200, { released: releasing.length });
    });
  }
}

function waitFor(query, response) {
  const bytes = Number(query.get('bytes') || 0);
  const ended = Number(query.get('ended') || 0);
  const deadline = Date.now() + Math.min(Number(query.get('timeout') || 10), 10) * 1000;
  (function check() {
    const now = {
      bytes: bodyBytes(),
      ended: requests.filter((record) => record.status !== 0).length,
    };
    const ok = now.bytes >= bytes && now.ended >= ended;
    if (ok || Date.now() > deadline) return json(response, 200, { ok, ...now });
    setTimeout(check, 5);
  })();
}

function json(response, status, value) {
  const body = JSON.stringify(value);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

function upstreamRequest(request, onAnswer) {
  const headers = { ...request.headers, host: `127.0.0.1:${upstreamPort}` };
  return http.request({ host: '127.0.0.1', port: upstreamPort, method: request.method, path: request.url, headers,
    agent: upstreamAgent }, onAnswer);
}

/** The request's answer, sent on to the client, with the record filled. */
function relay(answer, response, record) {
  record.status = answer.statusCode;
  record.answerOffset = answer.headers['upload-offset'] ?? null;
  const headers = { ...answer.headers };
  // The server's absolute Locations name its own port: the proxy's instead.
  if (headers.location) {
    headers.location = headers.location.replace(`127.0.0.1:${upstreamPort}`, response.req.headers.host);
    record.location = headers.location;
  }
  response.writeHead(answer.statusCode, headers);
  answer.pipe(response);
  noteAnswered();
}

/** Calls `done` once the upload at `uploadPath` has `offset`, or at `deadline`. */
function settle(uploadPath, offset, deadline, done) {
  const head = http.request({ host: '127.0.0.1', port: upstreamPort, method: 'HEAD', path: uploadPath,
    headers: { 'tus-resumable': '1.0.0' }, agent: upstreamAgent }, (answer) => {
    answer.resume();
    if (answer.headers['upload-offset'] === offset || Date.now() > deadline) return done();
    setTimeout(() => settle(uploadPath, offset, deadline, done), 20);
  });
  head.on('error', () => (Date.now() > deadline ? done() : setTimeout(() => settle(uploadPath, offset, deadline, done), 20)));
  head.end();
}

function forward(request, response) {
  const record = {
    method: request.method, path: request.url, status: 0, offset: request.headers['upload-offset'] ?? null,
    answerOffset: null, checksum: request.headers['upload-checksum'] ?? null,
    metadata: request.headers['upload-metadata'] ?? null, authorization: request.headers.authorization ?? null,
    length: request.headers['upload-length'] ?? null, location: null, bodyBytes: 0, fault: null,
    expect: request.headers.expect ?? null,
  };
  requests.push(record);
  const fault = takeFault(request.method);
  record.fault = fault ? fault.fault : null;
  request.on('data', (chunk) => { record.bodyBytes += chunk.length; });

  if (fault && fault.fault === 'duplicate') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const first = upstreamRequest(request, (answer) => {
        answer.resume();
        answer.on('end', () => {
          const second = upstreamRequest(request, (again) => relay(again, response, record));
          second.on('error', () => response.destroy());
          second.end(body);
        });
      });
      first.on('error', () => response.destroy());
      first.end(body);
    });
    return;
  }

  // Set once the request was held and released: what the server makes of
  // the body cut short goes nowhere, and this is called when it is done.
  let dropped = null;
  const upstream = upstreamRequest(request, (answer) => {
    if (dropped) {
      answer.resume();
      answer.on('end', dropped);
      return;
    }
    if (fault && fault.fault === 'lose') {
      record.status = answer.statusCode;
      record.answerOffset = answer.headers['upload-offset'] ?? null;
      answer.resume();
      answer.on('end', () => {
        response.socket.destroy();
        noteAnswered();
      });
      return;
    }
    relay(answer, response, record);
  });
  upstream.on('error', () => (dropped ? dropped() : response.socket.destroy()));

  if (fault && fault.fault === 'cut') {
    let sent = 0;
    request.on('data', (chunk) => {
      const room = fault.after - sent;
      if (room <= 0) return;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      sent += part.length;
      upstream.write(part);
      if (sent < fault.after) return;
      request.pause();
      // The server has what was written once it is flushed: then the
      // connection to it goes, mid-body, and the client's once the server
      // took the bytes in, so that what the client asks next is settled.
      upstream.write('', () => setTimeout(() => {
        upstream.destroy();
        const expected = String(Number(record.offset || 0) + fault.after);
        if (fault.settle === false) return request.socket.destroy();
        settle(request.url, expected, Date.now() + 5000, () => request.socket.destroy());
      }, 50));
    });
    return;
  }
  if (fault && fault.fault === 'corrupt') {
    let flipped = false;
    request.on('data', (chunk) => {
      if (!flipped && chunk.length > 0) {
        chunk[0] ^= 0xff;
        flipped = true;
      }
      upstream.write(chunk);
    });
    request.on('end', () => upstream.end());
    return;
  }
  // Streamed as it arrives, with back-pressure; held (GET /_hold) until
  // POST /_release drops it.
  let isHeld = false;
  request.on('data', (chunk) => {
    if (!upstream.write(chunk)) {
      request.pause();
      upstream.once('drain', () => { if (!isHeld) request.resume(); });
    }
    const length = Number(request.headers['content-length']);
    if (isHeld || !pendingHold || bodyBytes() < pendingHold.bytes || record.bodyBytes >= length) return;
    isHeld = true;
    request.pause();
    pendingHold.answer(true);
    const entry = {
      release(done) {
        if (!held.delete(entry)) return done();
        clearTimeout(timer);
        request.socket.destroy();
        // The server's connection is closed for writing once what was
        // written reached it: its body ends short, and the release is
        // done once the server answered or closed (within 5 seconds), so
        // that what the client asks next finds it settled.
        let finished = false;
        dropped = () => {
          if (finished) return;
          finished = true;
          clearTimeout(bound);
          upstream.destroy();
          done();
        };
        const bound = setTimeout(dropped, 5000);
        upstream.write('', () => (upstream.socket ? upstream.socket.end() : dropped()));
      },
    };
    const timer = setTimeout(() => entry.release(() => {}), 30000);
    held.add(entry);
  });
  request.on('end', () => upstream.end());
}

function stored(query, response) {
  const uploadPath = query.get('path') || '';
  if (kind === 'tuspyserver') {
    const file = path.join(folder, 'files', path.basename(uploadPath));
    if (!fs.existsSync(file)) return json(response, 404, { error: 'no such upload' });
    const bytes = fs.readFileSync(file);
    return json(response, 200, { size: bytes.length, sha256: crypto.createHash('sha256').update(bytes).digest('hex') });
  }
  const download = http.request({ host: '127.0.0.1', port: upstreamPort, method: 'GET', path: uploadPath,
    agent: upstreamAgent }, (answer) => {
    if (answer.statusCode !== 200) {
      answer.resume();
      return json(response, 404, { error: `the server answered ${answer.statusCode}` });
    }
    const hash = crypto.createHash('sha256');
    let size = 0;
    answer.on('data', (chunk) => { size += chunk.length; hash.update(chunk); });
    answer.on('end', () => json(response, 200, { size, sha256: hash.digest('hex') }));
  });
  download.on('error', (error) => json(response, 500, { error: error.message }));
  download.end();
}

const server = http.createServer((request, response) => {
  const url = new URL(request.url, 'http://127.0.0.1');
  if (url.pathname === '/_state') return json(response, 200, { requests });
  if (url.pathname === '/_stored') return stored(url.searchParams, response);
  if (url.pathname === '/_wait') return wait(url.searchParams, response);
  if (url.pathname === '/_wait_for') return waitFor(url.searchParams, response);
  if (url.pathname === '/_hold') return hold(url.searchParams, response);
  if (url.pathname === '/_release') return release(response);
  if (url.pathname === '/_control') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const control = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (control.clear) faults = [];
      else faults.push(control);
      json(response, 200, { armed: faults.length });
    });
    return;
  }
  forward(request, response);
});

(async () => {
  try {
    upstreamPort = await startChildOnFreePort();
  } catch (error) {
    process.stderr.write(`tus_proxy: ${error.message}\n`);
    process.stdout.write('UNAVAILABLE\n');
    stopChild();
    process.exit(1);
  }
  serve(server);
})();
