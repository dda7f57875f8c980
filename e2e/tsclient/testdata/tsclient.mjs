// tsclient.mjs drives toolgate with the official MCP TypeScript SDK's Client and
// prints exactly one JSON line on stdout describing what happened.
//
// Usage: node tsclient.mjs SPEC.json
//
// The SDK is imported by bare specifier, so this file must sit next to a
// node_modules folder holding @modelcontextprotocol/sdk (the Go tests copy it
// into a temporary folder and symlink node_modules there: Node resolves ESM
// imports relative to the importing file and ignores NODE_PATH).
//
// SPEC is a JSON object:
//
//   transport: one of
//     {kind: "http", url, headers?}                     Streamable HTTP, headers sent via requestInit
//     {kind: "http", settingsEnv, server}               the same, URL and headers read from the
//                                                       Gemini-style settings file named by the
//                                                       environment variable settingsEnv
//                                                       (mcpServers[server].httpUrl / .headers)
//     {kind: "stdio", command, args?, env?, cwd?}       StdioClientTransport spawning command
//   elicit?: {prefix}                                   declare elicitation and answer elicitation/create:
//                                                       a message containing "[decline]" is declined,
//                                                       one containing "[throw]" makes the handler throw
//                                                       (a JSON-RPC error back to toolgate), any other is
//                                                       accepted with {answer: prefix + message}
//   steps: [
//     {op: "list"}                                      tools/list → {names, withOutputSchema, meta}
//     {op: "call", name, arguments}                     tools/call → the CallToolResult, or {thrown}
//     {op: "close"}                                     HTTP: DELETE the session, then close;
//                                                       stdio: close (EOF), report the child's exit
//     {op: "probe"}                                     raw fetch POST naming the closed session id
//                                                       → {status, body}
//   ]
//
// Output: {ok, sdkLatest, protocolVersion, sessionId, serverInfo, capabilities, instructions,
// asked, transportErrors, closeErrors, steps: [...]}
// or {ok: false, error, steps} when something outside a step's own result failed.
// Tool refusals are results, never failures of the script.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema, LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const out = { ok: false, sdkLatest: LATEST_PROTOCOL_VERSION, steps: [], asked: [] };
let printed = false;

function finish(code) {
  if (!printed) {
    printed = true;
    process.stdout.write(JSON.stringify(out) + "\n");
  }
  process.exitCode = code;
}

// A scripted session must never hang the Go test: give up, say so, and exit.
const deadline = setTimeout(() => {
  out.ok = false;
  out.error = "tsclient: the session did not finish within 60 s";
  finish(3);
  process.exit(3);
}, 60_000);
deadline.unref();

function errorText(e) {
  if (e instanceof Error) {
    const code = e.code !== undefined ? ` (code ${e.code})` : "";
    return `${e.name}: ${e.message}${code}`;
  }
  return String(e);
}

async function main() {
  if (process.argv.length !== 3) {
    throw new Error("usage: node tsclient.mjs SPEC.json");
  }
  const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const tspec = spec.transport ?? {};

  let url = null;
  let headers = {};
  let transport;
  let child = null;
  if (tspec.kind === "http") {
    if (tspec.settingsEnv) {
      const file = process.env[tspec.settingsEnv];
      if (!file) throw new Error(`environment variable ${tspec.settingsEnv} is not set`);
      const entry = JSON.parse(readFileSync(file, "utf8"))?.mcpServers?.[tspec.server];
      if (!entry?.httpUrl) throw new Error(`${file} has no mcpServers.${tspec.server}.httpUrl`);
      url = entry.httpUrl;
      headers = entry.headers ?? {};
    } else {
      url = tspec.url;
      headers = tspec.headers ?? {};
    }
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  } else if (tspec.kind === "stdio") {
    transport = new StdioClientTransport({
      command: tspec.command,
      args: tspec.args ?? [],
      env: { ...process.env, ...(tspec.env ?? {}) },
      cwd: tspec.cwd,
      stderr: "inherit",
    });
  } else {
    throw new Error(`unknown transport kind ${JSON.stringify(tspec.kind)}`);
  }

  // The Client tells the transport which version initialize negotiated; the
  // stdio transport has no such hook, so one is added to observe it.
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    out.protocolVersion = v;
    setVersion?.(v);
  };

  const capabilities = {};
  if (spec.elicit) capabilities.elicitation = { form: {} };
  const client = new Client({ name: "toolgate-e2e-ts", version: "1.0.0" }, { capabilities });
  if (spec.elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const msg = req.params.message;
      out.asked.push(msg);
      if (msg.includes("[decline]")) return { action: "decline" };
      if (msg.includes("[throw]")) throw new Error("the person is away");
      return { action: "accept", content: { answer: spec.elicit.prefix + req.params.message } };
    });
  }
  // Errors the SDK reports while the session runs are toolgate's business;
  // those after close() began come from the SDK aborting its own reads (a POST's
  // SSE stream whose end it had not yet seen) and are kept apart.
  const transportErrors = [];
  const closeErrors = [];
  let closing = false;
  client.onerror = (e) => (closing ? closeErrors : transportErrors).push(errorText(e));

  await client.connect(transport);
  if (tspec.kind === "stdio") child = transport._process ?? null;
  out.sessionId = transport.sessionId ?? null;
  out.serverInfo = client.getServerVersion() ?? null;
  out.capabilities = client.getServerCapabilities() ?? null;
  out.instructions = client.getInstructions() ?? null;

  let closed = false;
  for (const step of spec.steps ?? []) {
    switch (step.op) {
      case "list": {
        const res = await client.listTools();
        out.steps.push({
          op: "list",
          names: res.tools.map((t) => t.name),
          // The SDK validates these tools' structuredContent against the schema
          // on every call (callTool throws on a mismatch).
          withOutputSchema: res.tools.filter((t) => t.outputSchema).map((t) => t.name),
          meta: res._meta ?? null,
          nextCursor: res.nextCursor ?? null,
        });
        break;
      }
      case "call": {
        try {
          const res = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
          out.steps.push({ op: "call", name: step.name, result: res });
        } catch (e) {
          out.steps.push({ op: "call", name: step.name, thrown: errorText(e) });
        }
        break;
      }
      case "close": {
        const r = { op: "close" };
        if (tspec.kind === "http") {
          try {
            await transport.terminateSession();
            r.terminated = true;
          } catch (e) {
            r.thrown = errorText(e);
          }
        }
        closing = true;
        await client.close();
        closed = true;
        if (child) {
          r.exitCode = child.exitCode;
          r.signalCode = child.signalCode;
        }
        out.steps.push(r);
        break;
      }
      case "probe": {
        if (!url || !out.sessionId) throw new Error("probe needs an HTTP session");
        const res = await fetch(url, {
          method: "POST",
          headers: {
            ...headers,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-session-id": out.sessionId,
            "mcp-protocol-version": out.protocolVersion,
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list", params: {} }),
        });
        out.steps.push({ op: "probe", status: res.status, body: await res.text(), sessionHeader: res.headers.get("mcp-session-id") });
        break;
      }
      default:
        throw new Error(`unknown step ${JSON.stringify(step.op)}`);
    }
  }
  if (!closed) {
    closing = true;
    await client.close();
  }
  out.transportErrors = transportErrors;
  out.closeErrors = closeErrors;
  out.ok = true;
}

main().then(
  () => finish(0),
  (e) => {
    out.ok = false;
    out.error = errorText(e);
    finish(1);
  },
);
