// A real TypeScript SDK v2 client (@modelcontextprotocol/client) against URL.
//
//   node client_v2.mjs URL --mode pin|auto|legacy [--token T] [--fault mcp-name]
//
// Connects (pin: versionNegotiation {pin: '2026-07-28'}; auto: server/discover probe with
// fallback; legacy: the 2025 initialize handshake), lists tools, calls `echo` (a JSON
// answer), `count` with a progress callback (an SSE answer carrying progress), `fail` (an
// isError result) and an unknown tool (a JSON-RPC error), sends
// notifications/roots/list_changed, closes. Prints one JSON line with what it got.
// --fault mcp-name: a fetch wrapper rewrites the `Mcp-Name` header of every tools/call to a
// name that is not in the body (a deliberate header/body mismatch).
import { outcomes } from './outcome.mjs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const args = process.argv.slice(2);
const url = new URL(args[0]);
const flag = (name) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const mode = flag('--mode') ?? 'pin';
const token = flag('--token');
const fault = flag('--fault');

const negotiation =
  mode === 'pin' ? { mode: { pin: '2026-07-28' } } : mode === 'auto' ? { mode: 'auto' } : { mode: 'legacy' };

async function faultyFetch(input, init) {
  const headers = new Headers(init?.headers);
  if (fault === 'mcp-name' && headers.get('mcp-method') === 'tools/call') {
    headers.set('mcp-name', 'not-the-tool-in-the-body');
  }
  return fetch(input, { ...init, headers });
}

const transport = new StreamableHTTPClientTransport(url, {
  requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined,
  fetch: fault ? faultyFetch : undefined,
});
const client = new Client(
  { name: 'ts-v2-client', version: '1.0.0' },
  { capabilities: { roots: { listChanged: true } }, versionNegotiation: negotiation },
);
const { out, settle } = outcomes();

await settle('connect', async () => {
  await client.connect(transport);
  return { protocolVersion: transport.protocolVersion ?? null };
});
if (!out.connect.error) {
  await settle('tools', async () => (await client.listTools()).tools.map((t) => t.name));
  await settle('echo', async () => (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })).content);
  const progress = [];
  await settle('count', async () =>
    (await client.callTool({ name: 'count', arguments: { n: 3 } }, { onprogress: (p) => progress.push(p.progress) })).content,
  );
  out.progress = progress;
  await settle('fail', async () => (await client.callTool({ name: 'fail', arguments: {} })).isError);
  await settle('unknown', async () => await client.callTool({ name: 'no-such-tool', arguments: {} }));
  await settle('notify', async () => (await client.sendRootsListChanged(), 'sent'));
  // Give the notification POST time to be answered before closing.
  await new Promise((r) => setTimeout(r, 200));
}
await settle('close', async () => (await client.close(), 'closed'));
console.log(JSON.stringify(out));
