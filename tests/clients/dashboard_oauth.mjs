// The dashboard's sign-in through the OAuth issuer, in a real browser: Debian's Chromium
// driven by playwright-core, against a server that tests/it/real_clients/oauth started with
// `--oauth-issuer` (tests/clients/issuer.mjs) and the dashboard's client at the issuer.
// Runs with node's test runner; the steps are tests, in order, sharing the browser.
// Configured by the environment:
//   DASHBOARD            the server's base URL, http://127.0.0.1:PORT
//   ISSUER               the issuer's identifier, http://127.0.0.1:PORT
//   PERSON, PASSWORD     who signs in (alice), and her password at the issuer
//   OWN_RUN, OTHER_RUN   a run she started over MCP, and one another person started
//   SHOTS                the folder the screenshots are saved in, for review
//   CHROMIUM             the browser's executable (default /usr/bin/chromium)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const base = process.env.DASHBOARD;
const issuer = process.env.ISSUER;
const shots = process.env.SHOTS;
const WAIT = { timeout: 15000 };

let browser;
let page; // the person's page

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage"],
  });
  page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
});

after(async () => {
  await browser?.close();
});

/** Goes to the dashboard and on to the issuer's sign-in page: at once, or by the link or
 * button of the dashboard's own sign-in page. */
async function toTheIssuer() {
  await page.goto(base + "/");
  if (!page.url().startsWith(issuer)) {
    assert.equal(new URL(page.url()).pathname, "/login");
    await page.screenshot({ path: join(shots, "sign-in.png"), fullPage: true });
    await page.getByRole("button", { name: /sign in/i })
      .or(page.getByRole("link", { name: /sign in/i }))
      .first()
      .click();
  }
  await page.waitForURL((url) => url.href.startsWith(issuer + "/interaction/"), WAIT);
}

test("a page without a session is refused", async () => {
  const reply = await fetch(base + "/", { redirect: "manual" });
  assert.equal(reply.status, 303);
});

test("the dashboard sends the browser to the issuer with PKCE and its client", async () => {
  const authorizations = [];
  page.on("request", (request) => {
    if (request.url().startsWith(issuer + "/auth?")) authorizations.push(new URL(request.url()));
  });
  await toTheIssuer();
  assert.equal(authorizations.length, 1, authorizations.join("\n"));
  const params = authorizations[0].searchParams;
  assert.equal(params.get("response_type"), "code");
  assert.equal(params.get("code_challenge_method"), "S256");
  assert.ok((params.get("code_challenge") ?? "").length >= 43);
  assert.ok(params.get("state"), "a state to bind the callback to this browser");
  assert.equal(params.get("redirect_uri"), base + "/login/callback");
  await page.getByRole("heading", { name: "Sign in" }).waitFor();
  await page.screenshot({ path: join(shots, "issuer-sign-in.png"), fullPage: true });
});

test("a wrong password keeps the person at the issuer", async () => {
  await page.getByLabel("Username").fill(process.env.PERSON);
  await page.getByLabel("Password").fill("not her password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").waitFor();
  assert.ok(page.url().startsWith(issuer));
});

test("she signs in at the issuer, allows the dashboard, and comes back signed in", async () => {
  await page.getByLabel("Username").fill(process.env.PERSON);
  await page.getByLabel("Password").fill(process.env.PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Allow" }).click();
  await page.waitForURL((url) => url.href.startsWith(base + "/") && !url.pathname.startsWith("/login"), WAIT);
  await page.getByRole("heading", { name: "Runs" }).waitFor(WAIT);
});

test("she sees her own run and not the other person's", async () => {
  const own = process.env.OWN_RUN;
  const other = process.env.OTHER_RUN;
  await page.locator(`a[href="/runs/${own}"]`).first().waitFor(WAIT);
  assert.equal(await page.locator(`a[href="/runs/${other}"]`).count(), 0);
  await page.screenshot({ path: join(shots, "runs-after-issuer-sign-in.png"), fullPage: true });
  const reply = await page.goto(`${base}/runs/${other}`);
  assert.equal(reply.status(), 404);
  const mine = await page.goto(`${base}/runs/${own}`);
  assert.equal(mine.status(), 200);
});

test("a callback with a code but no state of this browser is refused", async () => {
  const stranger = await (await browser.newContext()).newPage();
  const reply = await stranger.goto(`${base}/login/callback?code=forged&state=forged&iss=${encodeURIComponent(issuer)}`);
  assert.ok(reply.status() >= 400, `status ${reply.status()}`);
  const home = await stranger.goto(base + "/");
  assert.notEqual(new URL(stranger.url()).pathname, "/", `status ${home.status()}: not signed in`);
  await stranger.context().close();
});
