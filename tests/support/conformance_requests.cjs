// Preloaded into the conformance suite's Node process (node --require THIS_FILE ...):
// counts every HTTP request the suite makes, so a test can check that a tap in front of
// the server recorded each one. fetch() (undici) and node:http both publish a diagnostics
// channel event when a request is created; at exit the list goes to the JSON file named
// by MCP_TAP_CONFORMANCE_REQUESTS as [{"via", "method", "url"}, ...].
'use strict';
const dc = require('node:diagnostics_channel');
const fs = require('node:fs');

const target = process.env.MCP_TAP_CONFORMANCE_REQUESTS;
const seen = [];

if (target) {
  dc.subscribe('undici:request:create', ({ request }) => {
    seen.push({ via: 'fetch', method: request.method, url: `${request.origin}${request.path}` });
  });
  dc.subscribe('http.client.request.start', ({ request }) => {
    seen.push({ via: 'http', method: request.method, url: `${request.host}${request.path}` });
  });
  process.on('exit', () => {
    fs.writeFileSync(target, JSON.stringify(seen));
  });
}
