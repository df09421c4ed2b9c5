// The client under test for the conformance suite's CLIENT scenarios: the real TypeScript
// SDK v2 client (@modelcontextprotocol/client), generic rather than scenario-scripted.
//
//   node conformance_client.mjs URL        (the suite appends URL; MCP_CONFORMANCE_* env)
//
// Speaks 2026-07-28 (versionNegotiation pin) when MCP_CONFORMANCE_PROTOCOL_VERSION is
// 2026-07-28 or later, else the 2025 initialize handshake; connects, lists tools, calls
// each tool with arguments made from its input schema (a number 1, a string "test", a
// boolean true, the schema's default where it has one), then closes. Errors are printed
// and the process still exits 0: the suite's checks, not the client's exit status, are
// the verdicts compared direct vs through the tap.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = new URL(process.argv[process.argv.length - 1]);
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2026-07-28';
const modern = version >= '2026-07-28';

function sample(schema) {
  if (!schema || typeof schema !== 'object') return 'test';
  if ('default' in schema) return schema.default;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  switch (schema.type) {
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return args(schema);
    default:
      return 'test';
  }
}

function args(schema) {
  const out = {};
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) out[name] = sample(prop);
  return out;
}

const client = new Client(
  { name: 'mcp-tap-conformance-client', version: '1.0.0' },
  {
    capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {} },
    versionNegotiation: modern ? { mode: { pin: version } } : { mode: 'legacy' },
  },
);
const transport = new StreamableHTTPClientTransport(url);
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  for (const tool of tools) {
    try {
      await client.callTool({ name: tool.name, arguments: args(tool.inputSchema) });
    } catch (error) {
      console.error(`tools/call ${tool.name}: ${error?.message ?? error}`);
    }
  }
} catch (error) {
  console.error(`client: ${error?.message ?? error}`);
} finally {
  await client.close().catch(() => {});
}
