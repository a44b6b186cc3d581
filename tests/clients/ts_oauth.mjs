// The official TypeScript SDK (1.x) as an OAuth client of the server over Streamable HTTP,
// with a real authorization server (tests/clients/issuer.mjs): the SDK's `auth` module
// does the discovery from the `401` (RFC 9728 protected-resource metadata, then the
// issuer's RFC 8414 metadata), the dynamic registration, PKCE and the `resource`
// parameter; this script is the person at the browser: it follows the authorization URL
// with fetch (cookies kept), signs in with the name and password given, allows the
// consent, checks the redirect's `iss` (RFC 9207) and hands the code to
// `transport.finishAuth`.
//
//   node ts_oauth.mjs <scenario> --url <http://.../mcp> --user NAME --password PASSWORD
//                     [--foreign TASK_ID] [--admin <issuer admin URL>]
//
// Scenarios:
//   work       lists the tools, adds a todo, runs `ask` as a task (its question answered by
//              the elicitation handler), then lists what the person sees: `list_tasks`,
//              `list_runs`, `tasks/list`; and asks for another person's task (`--foreign`)
//              by `tasks/get` and `get_run`
//   lists      the same lists only, and the foreign task
//   read-only  for a person who allowed reading only: lists the tools and the todos, then
//              tries to add a todo (the SDK steps up on the `403`, as it does)
//   rotation   with `--admin`: a call, then the issuer rotates its signing key; the client
//              refreshes its token (signed with the new key) and calls again in the same
//              session; the old token, sent by hand, still passes while its key is
//              published; the issuer drops the old key; the old token is then refused
//              (within a bounded wait) while the new one goes on working
//
// Prints one JSON object per line on stdout: {"event": ..., ...}; never a token, a code or
// a secret (a token's header and claims, decoded, are printed: they are no credential).
// Exits 1 after {"event": "fatal", "message": ...} on any failure.

import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const emit = (event, fields = {}) =>
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" },
    user: { type: "string" },
    password: { type: "string" },
    foreign: { type: "string" },
    admin: { type: "string" },
  },
});
const [scenario] = positionals;
if (!options.url || !options.user || !options.password) {
  console.error("usage: node ts_oauth.mjs <scenario> --url URL --user NAME --password PASSWORD");
  process.exit(2);
}
const serverUrl = new URL(options.url);
const REDIRECT = "http://127.0.0.1/ts-oauth-client/callback";

/** The header and claims of a JWT, without its signature. */
function decode(token) {
  const [header, payload] = token.split(".").slice(0, 2)
    .map((part) => JSON.parse(Buffer.from(part, "base64url").toString()));
  return { header, claims: payload };
}

/** What the SDK keeps between calls, in memory; the authorization is done by `browse`. */
class Provider {
  #client;
  #tokens;
  #verifier;
  #discovery;
  pendingCode = null;
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: "ts-oauth-client",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() { return this.#client; }
  saveClientInformation(info) {
    this.#client = info;
    emit("registered", {
      issuer: info.issuer,
      hasClientId: typeof info.client_id === "string",
      authMethod: info.token_endpoint_auth_method ?? null,
    });
  }
  tokens() { return this.#tokens; }
  saveTokens(tokens) {
    this.#tokens = tokens;
    const { header, claims } = decode(tokens.access_token);
    emit("token", {
      tokenType: tokens.token_type,
      refreshable: typeof tokens.refresh_token === "string",
      header,
      claims,
    });
  }
  saveCodeVerifier(verifier) { this.#verifier = verifier; }
  codeVerifier() { return this.#verifier; }
  saveDiscoveryState(state) { this.#discovery = state; }
  discoveryState() { return this.#discovery; }
  async redirectToAuthorization(url) {
    this.pendingCode = await browse(url, this.#discovery?.authorizationServerMetadata?.issuer);
  }
}

/** A person at a browser: follows `url` to the login form, signs in, allows, and returns
 * the code of the redirect back to the client, after checking its `iss`. */
async function browse(url, issuer) {
  const params = url.searchParams;
  emit("authorize", {
    endpoint: url.origin + url.pathname,
    responseType: params.get("response_type"),
    codeChallengeMethod: params.get("code_challenge_method"),
    hasCodeChallenge: (params.get("code_challenge") ?? "").length >= 43,
    hasState: params.has("state"),
    resource: params.getAll("resource"),
    scope: params.get("scope"),
    redirectUri: params.get("redirect_uri"),
  });
  const jar = new Map();
  let next = url;
  let post = null;
  const pages = [];
  for (let hop = 0; hop < 20; hop++) {
    const headers = { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") };
    if (post !== null) headers["content-type"] = "application/x-www-form-urlencoded";
    const reply = await fetch(next, {
      method: post === null ? "GET" : "POST",
      body: post ?? undefined,
      headers,
      redirect: "manual",
    });
    for (const cookie of reply.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const at = pair.indexOf("=");
      const [name, value] = [pair.slice(0, at).trim(), pair.slice(at + 1)];
      if (value === "" || /expires=Thu, 01 Jan 1970/i.test(cookie)) jar.delete(name);
      else jar.set(name, value);
    }
    if (reply.status >= 300 && reply.status < 400) {
      const location = new URL(reply.headers.get("location"), next);
      if (location.href.startsWith(REDIRECT)) {
        const back = location.searchParams;
        if (back.has("error")) throw new Error(`authorization refused: ${back.get("error")}`);
        emit("redirected", {
          pages,
          hasCode: back.has("code"),
          stateKept: back.get("state") === params.get("state"),
          iss: back.get("iss"),
          issMatches: issuer !== undefined && back.get("iss") === issuer,
        });
        if (back.get("iss") !== issuer) throw new Error(`the redirect's iss is not ${issuer}`);
        return back.get("code");
      }
      next = location;
      post = null;
      continue;
    }
    const html = await reply.text();
    const action = html.match(/<form method="post" action="([^"]+)"/);
    if (!action) throw new Error(`the issuer showed no form (${reply.status}): ${html.slice(0, 500)}`);
    next = new URL(action[1], next);
    if (html.includes('name="username"')) {
      pages.push("login");
      post = new URLSearchParams({ username: options.user, password: options.password }).toString();
    } else {
      pages.push("consent");
      post = "";
    }
  }
  throw new Error("too many redirects at the issuer");
}

// Every request the SDK makes, to the server or the issuer: method, path, status and the
// challenge; no query, no body, no header that carries a credential.
const requests = [];
const loggedFetch = async (input, init) => {
  const reply = await fetch(input, init);
  const url = new URL(input instanceof Request ? input.url : input);
  requests.push({
    method: init?.method ?? (input instanceof Request ? input.method : "GET"),
    origin: url.origin,
    path: url.pathname,
    status: reply.status,
    wwwAuthenticate: reply.headers.get("www-authenticate"),
  });
  return reply;
};

const provider = new Provider();
const asked = [];
const client = new Client(
  { name: "ts-oauth-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { ok: true } };
});

const transport = () =>
  new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: loggedFetch });

/** Connects, doing the authorization the first `401` asks for. */
async function connect() {
  try {
    await client.connect(transport());
    emit("connected", { authorizedFirst: false });
    return;
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || provider.pendingCode === null) throw error;
  }
  emit("challenged", { requests: requests.splice(0) });
  const first = transport();
  await first.finishAuth(takeCode());
  emit("exchanged", { requests: requests.splice(0) });
  await client.connect(first);
  emit("connected", { requests: requests.splice(0) });
}

function takeCode() {
  const code = provider.pendingCode;
  provider.pendingCode = null;
  return code;
}

const errorFields = (error) => ({
  code: error instanceof McpError ? error.code : null,
  message: String(error?.message ?? error),
});

/** A tool's structured result, or its error as the client saw it. */
async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  return { isError: result.isError ?? false, structured: result.structuredContent ?? null, content: result.content };
}

async function lists() {
  emit("listTasks", { result: await call("list_tasks", {}) });
  emit("listRuns", { result: await call("list_runs", {}) });
  const tasks = await client.experimental.tasks.listTasks();
  emit("tasksList", { taskIds: tasks.tasks.map((t) => t.taskId) });
  if (options.foreign) {
    try {
      const got = await client.experimental.tasks.getTask(options.foreign);
      emit("foreignTask", { ok: true, task: got });
    } catch (error) {
      emit("foreignTask", { ok: false, ...errorFields(error) });
    }
    emit("foreignRun", { result: await call("get_run", { run_id: options.foreign }) });
  }
}

async function work() {
  const tools = await client.listTools();
  emit("tools", { names: tools.tools.map((t) => t.name) });
  emit("added", { result: await call("add_task", { title: `${options.user}'s todo` }) });
  const stream = client.experimental.tasks.callToolStream(
    { name: "ask", arguments: { who: options.user } },
    undefined,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    if (message.type === "taskCreated") emit("taskCreated", { task: message.task });
    else if (message.type === "result") emit("result", { result: message.result, asked });
    else if (message.type === "error") emit("streamError", errorFields(message.error));
  }
  await lists();
}

async function readOnly() {
  const tools = await client.listTools();
  emit("tools", { names: tools.tools.map((t) => t.name) });
  emit("listTasks", { result: await call("list_tasks", {}) });
  requests.splice(0);
  try {
    const added = await call("add_task", { title: `${options.user} may not add this` });
    emit("addRefused", { ok: true, result: added, requests: requests.splice(0) });
  } catch (error) {
    emit("addRefused", { ok: false, ...errorFields(error), requests: requests.splice(0) });
  }
}

/** A request of its own with `token`: a new session's `initialize`. */
async function initializeWith(token) {
  const reply = await fetch(serverUrl, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({
      jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "by-hand", version: "1" } },
    }),
  });
  await reply.body?.cancel();
  return { status: reply.status, wwwAuthenticate: reply.headers.get("www-authenticate") };
}

async function admin(action) {
  const reply = await fetch(`${options.admin}/${action}`, { method: "POST" });
  if (!reply.ok) throw new Error(`the issuer's ${action} answered ${reply.status}`);
  const keys = await reply.json();
  emit(action, keys);
  return keys;
}

async function rotation() {
  if (!options.admin) throw new Error("rotation needs --admin");
  const step = (event, fields) => emit(event, { ...fields, requests: requests.splice(0) });
  step("before", { result: await call("add_task", { title: "before the rotation" }) });
  const old = provider.tokens().access_token;
  await admin("rotate");
  // The refresh an SDK does when its token nears its end, done now.
  const refreshed = await auth(provider, { serverUrl, fetchFn: loggedFetch });
  step("refreshed", { result: refreshed, kid: decode(provider.tokens().access_token).header.kid });
  step("afterRotate", { result: await call("add_task", { title: "signed with the new key" }) });
  emit("oldWhilePublished", await initializeWith(old));
  const dropped = await admin("drop");
  // The server learns of the drop when it next fetches the JWKS: poll, bounded.
  let refused = null;
  const tries = [];
  for (let i = 0; i < 100 && refused === null; i++) {
    const seen = await initializeWith(old);
    tries.push(seen.status);
    if (seen.status === 401) refused = seen;
    else await new Promise((done) => setTimeout(done, 100));
  }
  emit("oldAfterDrop", { tries: tries.length, refused, statuses: [...new Set(tries)] });
  step("newAfterDrop", {
    result: await call("add_task", { title: `after ${dropped.current} alone` }),
    session: await initializeWith(provider.tokens().access_token),
  });
}

const scenarios = { work, lists, rotation, "read-only": readOnly };
const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
try {
  await connect();
  await run();
  await client.close();
  emit("done", { requests });
} catch (error) {
  emit("fatal", { ...errorFields(error), requests });
  await client.close().catch(() => {});
  process.exit(1);
}
