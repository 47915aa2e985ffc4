'use strict';
/**
 * How the test servers run: `serve(server)` listens on 127.0.0.1 on a free
 * port, prints the port alone on stdout's first line once listening, and
 * exits when its standard input reaches EOF (the test that started it went
 * away, even if it crashed) or on SIGTERM or SIGINT.
 */
module.exports = function serve(server) {
  function exit() {
    server.closeAllConnections();
    server.close();
    process.exit(0);
  }

  process.on('SIGTERM', exit);
  process.on('SIGINT', exit);
  process.stdin.on('end', exit);
  process.stdin.on('close', exit);
  process.stdin.on('error', exit);
  process.stdin.resume();

  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${server.address().port}\n`);
  });
};
