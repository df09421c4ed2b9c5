// A real TypeScript SDK 1.x server (@modelcontextprotocol/sdk, 2025-11-25) on loopback.
//
//   node server_v1.mjs PORT [--json]
//
// The SDK's stateful StreamableHTTPServerTransport (Mcp-Session-Id, GET listen stream,
// DELETE), one transport per session, with the SDK's example in-memory event store, so
// streams are resumable. --json: answers as application/json instead of SSE. The `poll`
// tool closes its SSE stream after a first progress event (the SDK's SEP-1699 polling:
// extra.closeSSEStream), so the client resumes with a GET carrying Last-Event-ID and
// receives the answer there. Prints "listening PORT" once bound.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import * as z from 'zod/v4';

const args = process.argv.slice(2);
const port = Number(args[0]);
const json = args.includes('--json');

function makeServer() {
  const server = new McpServer({ name: 'ts-v1-peer', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'Echo the text back', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  );
  server.registerTool(
    'count',
    { description: 'Count to n with progress', inputSchema: { n: z.number() } },
    async ({ n }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let i = 1; progressToken !== undefined && i <= n; i++) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress: i, total: n },
        });
      }
      return { content: [{ type: 'text', text: `counted to ${n}` }] };
    },
  );
  server.registerTool(
    'poll',
    { description: 'Close the stream once, answer on the resumed one' },
    async (extra) => {
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress: 1, total: 2 },
        });
      }
      extra.closeSSEStream?.();
      await new Promise((r) => setTimeout(r, 300));
      return { content: [{ type: 'text', text: 'polled' }] };
    },
  );
  return server;
}

const transports = new Map();

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  return text ? JSON.parse(text) : undefined;
}

createServer(async (req, res) => {
  const sessionId = req.headers['mcp-session-id'];
  const body = req.method === 'POST' ? await readJson(req).catch(() => undefined) : undefined;
  let transport = sessionId ? transports.get(sessionId) : undefined;
  if (!transport) {
    // A new transport per request without a known session: the SDK itself answers an
    // initialize (starting a session) or refuses anything else (400 "Server not
    // initialized", 404 "Session not found").
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: json,
      eventStore: new InMemoryEventStore(),
      retryInterval: 100,
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
    await makeServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
}).listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
