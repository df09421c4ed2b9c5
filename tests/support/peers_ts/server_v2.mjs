// A real TypeScript SDK v2 server (@modelcontextprotocol/server + /node) on loopback.
//
//   node server_v2.mjs PORT [--auth TOKEN] [--legacy reject|stateless]
//
// createMcpHandler serves 2026-07-28 per-request traffic and (by default) the 2025-era
// stateless fallback from one factory, behind the SDK's own localhost Host/Origin guards,
// as @modelcontextprotocol/node's README wires a plain node:http server. With --auth the
// SDK's requireBearerAuth gate sits in front: a request without `Authorization: Bearer
// TOKEN` gets the SDK's 401 with `WWW-Authenticate` and an OAuth error body. Prints
// "listening PORT" once the socket is bound.
import { createServer } from 'node:http';
import {
  localhostHostValidation,
  localhostOriginValidation,
  toNodeHandler,
} from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer, requireBearerAuth } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

const args = process.argv.slice(2);
const port = Number(args[0]);
const flag = (name) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const token = flag('--auth');
const legacy = flag('--legacy') ?? 'stateless';

function factory() {
  const server = new McpServer({ name: 'ts-v2-peer', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'Echo the text back', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
  );
  server.registerTool(
    'count',
    { description: 'Count to n with progress', inputSchema: z.object({ n: z.number() }) },
    async ({ n }, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken;
      if (progressToken !== undefined) {
        for (let i = 1; i <= n; i++) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken, progress: i, total: n },
          });
        }
      }
      return { content: [{ type: 'text', text: `counted to ${n}` }] };
    },
  );
  server.registerTool(
    'fail',
    { description: 'A tool that reports an error result' },
    async () => ({ isError: true, content: [{ type: 'text', text: 'it failed' }] }),
  );
  return server;
}

const handler = createMcpHandler(factory, { legacy });
const serve = toNodeHandler(handler);
const validateHost = localhostHostValidation();
const validateOrigin = localhostOriginValidation();
const verifier = {
  async verifyAccessToken(presented) {
    if (presented !== token) {
      const { OAuthError } = await import('@modelcontextprotocol/server');
      throw new OAuthError('invalid_token', 'Invalid access token');
    }
    return { token: presented, clientId: 'peer-test', scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
  },
};
const gate = token
  ? requireBearerAuth({
      verifier,
      resourceMetadataUrl: `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`,
    })
  : undefined;

createServer(async (req, res) => {
  if (!validateHost(req, res) || !validateOrigin(req, res)) return;
  if (gate) {
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) =>
        Array.isArray(v) ? v.map((x) => [k, x]) : [[k, String(v)]],
      ),
    });
    const auth = await gate(request);
    if (auth instanceof Response) {
      res.writeHead(auth.status, Object.fromEntries(auth.headers));
      res.end(Buffer.from(await auth.arrayBuffer()));
      req.resume();
      return;
    }
    req.auth = auth;
  }
  await serve(req, res);
}).listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
