// An OAuth 2.1 / OpenID Connect authorization server for the tests: `oidc-provider` (the
// certified OpenID provider from npm, as locked in package-lock.json) on plain HTTP on
// loopback, with what an MCP deployment's issuer has:
//   - people who sign in with a password (`--user NAME:PASSWORD`, repeated) on a login page,
//     then consent on a second page; the subject (`sub`) of a person's tokens is the name;
//     `--consent NAME=SCOPE,SCOPE` makes that person allow those of the resource's scopes
//     only, whatever the client asks for (as a person who unticks the others would);
//   - RFC 8707 resource indicators: for each `--resource URI`, access tokens are JWTs
//     (RFC 9068, `typ: at+jwt`) whose `aud` is that URI and whose `scope` holds the granted
//     scopes among `--scopes`; a resource not listed is refused (`invalid_target`);
//   - PKCE (S256) required of every client, public or confidential;
//   - dynamic client registration (RFC 7591), open, as MCP clients use it; refresh tokens
//     for any client whose registration allows the grant;
//   - `--client ID:SECRET_FILE:REDIRECT_URI`: a pre-registered confidential client (the
//     dashboard's sign-in), its secret read from the file;
//   - `iss` in every authorization response (RFC 9207);
//   - signing keys rotated on request, through an admin endpoint whose path holds a secret
//     printed only on stdout: `POST <admin>/rotate` adds a new RSA key and signs with it from
//     then on (the old one stays in the JWKS for tokens already issued); `POST <admin>/drop`
//     removes every key but the current one from the JWKS. Both answer the key ids.
//
//   node issuer.mjs [--port N] --resource URI --scopes "a b" --user alice:pw [--user ...]
//                   [--consent NAME=SCOPE,...] [--client ID:SECRET_FILE:REDIRECT_URI]
//                   [--access-token-ttl SECONDS]
//
// Prints one JSON line on stdout when it listens:
//   {"issuer": "http://127.0.0.1:PORT", "port": PORT, "admin": "<url>", "kid": "<kid>"}
// and logs each request's method, path and status on stderr (never a query or a body, which
// carry codes and tokens).

import { randomBytes, generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { parseArgs } from "node:util";

import Provider, { errors } from "oidc-provider";

// stdout holds the one line the test reads; the provider's notices go to stderr.
console.log = console.info = console.warn = console.error;
// Rotation at run time replaces the provider's key store the way its constructor fills it
// (`jwks` is read once, at construction); this version's module is the one locked.
import initializeKeystore from "oidc-provider/lib/helpers/initialize_keystore.js";

const { values: options } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    resource: { type: "string", multiple: true, default: [] },
    scopes: { type: "string", default: "" },
    user: { type: "string", multiple: true, default: [] },
    client: { type: "string", multiple: true, default: [] },
    consent: { type: "string", multiple: true, default: [] },
    "access-token-ttl": { type: "string", default: "600" },
  },
});

const resources = new Set(options.resource);
const resourceScopes = options.scopes.split(" ").filter(Boolean);
const accessTokenTTL = Number(options["access-token-ttl"]);
const users = new Map(
  options.user.map((entry) => {
    const colon = entry.indexOf(":");
    if (colon < 1) throw new Error(`--user NAME:PASSWORD, not ${entry}`);
    return [entry.slice(0, colon), entry.slice(colon + 1)];
  }),
);
const consents = new Map(
  options.consent.map((entry) => {
    const [name, scopes] = entry.split("=");
    return [name, new Set(scopes.split(",").filter(Boolean))];
  }),
);
const clients = options.client.map((entry) => {
  const [clientId, secretFile, ...redirect] = entry.split(":");
  return {
    client_id: clientId,
    client_secret: readFileSync(secretFile, "utf8").trim(),
    redirect_uris: [redirect.join(":")],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic",
  };
});

let keyCount = 0;
function newSigningKey() {
  keyCount += 1;
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = privateKey.export({ format: "jwk" });
  return { ...jwk, kid: `key-${keyCount}-${randomBytes(4).toString("hex")}`, alg: "RS256", use: "sig" };
}
// The current key is first: the provider signs with the first key that fits the algorithm.
let keys = [newSigningKey()];

// Bound before the provider exists: the issuer identifier holds the port.
const http = createServer();
await new Promise((listening) => http.listen(Number(options.port), "127.0.0.1", listening));
const { port } = http.address();
const issuer = `http://127.0.0.1:${port}`;
const adminPath = `/admin/${randomBytes(24).toString("hex")}`;

const provider = new Provider(issuer, {
  clients,
  jwks: { keys },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  scopes: ["openid", "offline_access", ...resourceScopes],
  claims: { openid: ["sub"], profile: ["name", "preferred_username"] },
  async findAccount(_ctx, id) {
    if (!users.has(id)) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, name: id, preferred_username: id };
      },
    };
  },
  pkce: { required: () => true },
  ttl: {
    AccessToken: accessTokenTTL,
    AuthorizationCode: 60,
    Grant: 3600,
    IdToken: 3600,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource at the token endpoint gets the one it was granted.
      useGrantedResource: async () => true,
      async getResourceServerInfo(_ctx, resource) {
        if (!resources.has(resource)) throw new errors.InvalidTarget();
        return {
          scope: resourceScopes.join(" "),
          audience: resource,
          accessTokenTTL,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  async issueRefreshToken(_ctx, client) {
    return client.grantTypeAllowed("refresh_token");
  },
  interactions: {
    url: (_ctx, interaction) => `/interaction/${interaction.uid}`,
  },
  async renderError(ctx, out) {
    ctx.type = "html";
    ctx.body = page("Error", `<p id="error">${escape(out.error)}: ${escape(out.error_description ?? "")}</p>`);
  },
});

provider.use(async (ctx, next) => {
  await next();
  console.error(`issuer: ${ctx.method} ${ctx.path.startsWith("/admin/") ? "/admin/…" : ctx.path} ${ctx.status}`);
});
provider.use(admin);
provider.use(interactions);
http.on("request", provider.callback());

process.stdout.write(JSON.stringify({ issuer, port, admin: issuer + adminPath, kid: keys[0].kid }) + "\n");
process.on("SIGTERM", () => process.exit(0));

/** Key rotation, for the test that holds the admin path. */
async function admin(ctx, next) {
  if (!ctx.path.startsWith(adminPath + "/") || ctx.method !== "POST") return next();
  switch (ctx.path.slice(adminPath.length)) {
    case "/rotate":
      keys = [newSigningKey(), ...keys];
      break;
    case "/drop":
      keys = keys.slice(0, 1);
      break;
    default:
      return next();
  }
  initializeKeystore.call(provider, { keys });
  ctx.body = { current: keys[0].kid, published: keys.map((key) => key.kid) };
}

/** The login and consent pages, and their forms' posts. */
async function interactions(ctx, next) {
  const match = ctx.path.match(/^\/interaction\/([\w-]+)(\/login|\/confirm)?$/);
  if (!match) return next();
  ctx.set("cache-control", "no-store");
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { uid, prompt, params } = details;
  const action = match[2] ?? "";
  if (ctx.method === "GET" && action === "") {
    ctx.type = "html";
    ctx.body = prompt.name === "login" ? loginPage(uid, params) : consentPage(uid, params, prompt.details);
    return;
  }
  if (ctx.method !== "POST") return next();
  const form = new URLSearchParams(await body(ctx.req));
  if (action === "/login" && prompt.name === "login") {
    const name = form.get("username") ?? "";
    if (!users.has(name) || users.get(name) !== form.get("password")) {
      ctx.status = 401;
      ctx.type = "html";
      ctx.body = loginPage(uid, params, "Wrong username or password.");
      return;
    }
    return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: name } }, {
      mergeWithLastSubmission: false,
    });
  }
  if (action === "/confirm" && prompt.name === "consent") {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    // A person who allows only some of the resource's scopes refuses the rest, so that the
    // provider does not ask again.
    const allowed = consents.get(details.session.accountId);
    const allows = (scope) => !allowed || !resourceScopes.includes(scope) || allowed.has(scope);
    const split = (scopes) => [scopes.filter(allows).join(" "), scopes.filter((s) => !allows(s)).join(" ")];
    const [oidcGranted, oidcRefused] = split(missing.missingOIDCScope ?? []);
    if (oidcGranted) grant.addOIDCScope(oidcGranted);
    if (oidcRefused) grant.rejectOIDCScope(oidcRefused);
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      const [granted, refused] = split(scopes);
      if (granted) grant.addResourceScope(indicator, granted);
      if (refused) grant.rejectResourceScope(indicator, refused);
    }
    const grantId = await grant.save();
    const consent = details.grantId ? {} : { grantId };
    return provider.interactionFinished(ctx.req, ctx.res, { consent }, { mergeWithLastSubmission: true });
  }
  return next();
}

function loginPage(uid, params, error = "") {
  return page(
    "Sign in",
    `<p>Sign in to continue to <strong>${escape(params.client_id)}</strong>.</p>
${error ? `<p role="alert">${escape(error)}</p>` : ""}
<form method="post" action="/interaction/${uid}/login">
  <label>Username <input name="username" autocomplete="username" required></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit">Sign in</button>
</form>`,
  );
}

function consentPage(uid, params, details) {
  const scopes = [
    ...(details.missingOIDCScope ?? []),
    ...Object.values(details.missingResourceScopes ?? {}).flat(),
  ];
  return page(
    "Authorize",
    `<p><strong>${escape(params.client_id)}</strong> asks for: <span id="scopes">${escape([...new Set(scopes)].join(" "))}</span>
on <span id="resource">${escape(String(params.resource ?? ""))}</span>.</p>
<form method="post" action="/interaction/${uid}/confirm">
  <button type="submit">Allow</button>
</form>`,
  );
}

function page(title, content) {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1>${content}</body></html>`;
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function body(req) {
  let text = "";
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 16384) throw new Error("form too large");
  }
  return text;
}
