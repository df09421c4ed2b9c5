// A real TypeScript SDK 1.x client (@modelcontextprotocol/sdk, 2025-11-25) against URL.
//
//   node client_v1.mjs URL [--poll]
//
// initialize handshake, tools/list, tools/call `echo` and `count` (with progress), an
// unknown tool (a JSON-RPC error), notifications/roots/list_changed, then closes the
// session (DELETE). --poll also calls `poll` (the server closes the stream, the client
// resumes it with Last-Event-ID). Prints one JSON line with what it got.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { outcomes } from './outcome.mjs';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const args = process.argv.slice(2);
const url = new URL(args[0]);
const transport = new StreamableHTTPClientTransport(url, {
  reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 500, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
});
const client = new Client({ name: 'ts-v1-client', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
const { out, settle } = outcomes();
await settle('connect', async () => {
  await client.connect(transport);
  return { protocolVersion: transport.protocolVersion ?? null, session: Boolean(transport.sessionId) };
});
if (!out.connect.error) {
  await settle('tools', async () => (await client.listTools()).tools.map((t) => t.name));
  await settle('echo', async () => (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })).content);
  const progress = [];
  await settle('count', async () =>
    (await client.callTool({ name: 'count', arguments: { n: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) })).content,
  );
  out.progress = progress;
  if (args.includes('--poll')) {
    await settle('poll', async () => (await client.callTool({ name: 'poll', arguments: {} }, undefined, { onprogress: () => {} })).content);
  }
  await settle('unknown', async () => await client.callTool({ name: 'no-such-tool', arguments: {} }));
  await settle('notify', async () => (await client.sendRootsListChanged(), 'sent'));
  await new Promise((r) => setTimeout(r, 200));
  await settle('terminate', async () => (await transport.terminateSession(), 'terminated'));
}
await settle('close', async () => (await client.close(), 'closed'));
console.log(JSON.stringify(out));
