// The dashboard in a real browser: Debian's Chromium driven by playwright-core, against a
// server that tests/it/browser.rs started (`serve --http` with a tokens file and the
// workflows of tests/fixtures/dashboard). Runs with node's test runner; each step is a
// test, in order, sharing the browser. Configured by the environment:
//   DASHBOARD   the server's base URL, http://127.0.0.1:PORT
//   ALICE, BOB  the tokens of two principals
//   SHOTS       the folder the screenshots are saved in, for review
//   CHROMIUM    the browser's executable (default /usr/bin/chromium)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const base = process.env.DASHBOARD;
const shots = process.env.SHOTS;
const WAIT = { timeout: 15000 };

let browser;
let alice; // alice's page, signed in
let askedRun; // the run alice starts from MCP, which asks a question

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  await browser?.close();
});

/** A page of a new browser context (cookies of its own), signed in with `token`. */
async function signedIn(token) {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  await page.goto(base + "/");
  assert.equal(new URL(page.url()).pathname, "/login");
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(base + "/");
  return page;
}

/** JSON-RPC over MCP as the holder of `token`, in a 2025-11-25 session of its own. */
async function mcpSession(token) {
  const headers = {
    authorization: `Bearer ${token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
  };
  const post = async (message) => {
    const reply = await fetch(base + "/mcp", { method: "POST", headers, body: JSON.stringify(message) });
    const text = await reply.text();
    const data = text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5));
    return { reply, messages: (data.length ? data : [text]).filter((t) => t.trim()).map((t) => JSON.parse(t)) };
  };
  const init = await post({
    jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "browser-test", version: "1" } },
  });
  headers["mcp-session-id"] = init.reply.headers.get("mcp-session-id");
  headers["mcp-protocol-version"] = "2025-11-25";
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  return post;
}

/** The form controls of the page that no label names. */
async function unlabelled(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("input:not([type=hidden]), select, textarea")]
      .filter((c) => c.labels.length === 0 && !c.getAttribute("aria-label"))
      .map((c) => c.outerHTML),
  );
}

test("a page without a session is refused", async () => {
  const reply = await fetch(base + "/", { redirect: "manual" });
  assert.equal(reply.status, 303);
  assert.equal(reply.headers.get("location"), "/login");
  const action = await fetch(base + "/runs/x/cancel", { method: "POST", headers: { origin: base }, redirect: "manual" });
  assert.equal(action.status, 403);
});

test("sign in with a token", async () => {
  alice = await signedIn(process.env.ALICE);
  await alice.getByRole("heading", { name: "Runs" }).waitFor();
});

test("a run started from MCP that asks a question shows in the list, marked as waiting", async () => {
  const post = await mcpSession(process.env.ALICE);
  const call = await post({
    jsonrpc: "2.0", id: 2, method: "tools/call",
    params: { name: "run_workflow", arguments: { workflow: "review", inputs: { release: "2.0" } }, task: { ttl: 600000 } },
  });
  askedRun = call.messages.find((m) => m.id === 2).result.task.taskId;
  // The list follows the store: the row appears, then turns to waiting, with no reload.
  await alice.evaluate(() => { window.notReloaded = true; });
  const row = alice.locator("tr.waiting", { hasText: "review" });
  await row.waitFor(WAIT);
  assert.equal(await alice.evaluate(() => window.notReloaded), true);
  await alice.screenshot({ path: join(shots, "runs.png"), fullPage: true });
});

test("the run's page shows its DAG and its question", async () => {
  await alice.goto(`${base}/runs/${askedRun}`);
  await alice.locator('svg.dag g.node[data-node="review"]').waitFor();
  assert.match(await alice.locator('g.node[data-node="review"]').getAttribute("class"), /running/);
  await alice.getByRole("heading", { name: "Waiting for an answer" }).waitFor();
  await alice.getByText("Review release 2.0").waitFor();
  assert.deepEqual(await unlabelled(alice), []);
  // From the keyboard: a node of the picture is a link to its details.
  await alice.locator('svg.dag a[href="#node-review"]').focus();
  await alice.keyboard.press("Enter");
  await alice.waitForURL(/#node-review$/);
});

test("a live update keeps the focus and the open details of the nodes", async () => {
  // Open the review node's action from the keyboard, and stay on it.
  const summary = alice.locator("#node-review + tr details > summary");
  await summary.focus();
  await alice.keyboard.press("Enter");
  assert.equal(await alice.locator("#node-review + tr details").getAttribute("open"), "");
  // Changes in the store (short runs started over MCP) wake the page, which replaces the
  // nodes' region once its text moves with the clock (the running node's time).
  await alice.evaluate(() => { document.getElementById("live-nodes").dataset.marker = "old"; });
  const post = await mcpSession(process.env.ALICE);
  const replaced = () => alice.evaluate(() => !document.getElementById("live-nodes").dataset.marker);
  for (let id = 100; id < 160 && !(await replaced()); id++) {
    const definition = { nodes: { tick: { render: "tick" } } };
    await post({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "run_workflow", arguments: { definition } } });
    await alice.waitForTimeout(250);
  }
  assert.equal(await replaced(), true, "the nodes' region was never replaced");
  assert.equal(await alice.locator("#node-review + tr details").getAttribute("open"), "");
  const focused = await alice.evaluate(() => {
    const at = document.activeElement;
    return `${at.tagName} ${at.closest("tr.detail")?.previousElementSibling?.id}`;
  });
  assert.equal(focused, "SUMMARY node-review");
});

test("answering the form lets the run finish, seen live without a reload", async () => {
  await alice.getByLabel("Verdict").selectOption("ship");
  await alice.getByLabel("Notes").fill("All <checks> green");
  await alice.getByRole("button", { name: "Answer" }).click();
  await alice.waitForURL(`${base}/runs/${askedRun}?done=answered`);
  await alice.evaluate(() => { window.notReloaded = true; });
  await alice.locator("#live-summary .badge.succeeded").waitFor(WAIT);
  assert.equal(await alice.evaluate(() => window.notReloaded), true);
  assert.match(await alice.locator('g.node[data-node="todo"]').getAttribute("class"), /succeeded/);
  // The question node's arguments as resolved when it asked, and the answer it took.
  const asked = await alice.locator("#node-review + tr details.asked").textContent();
  assert.match(asked, /Review release 2\.0.*"verdict": "ship"/s);
  await alice.screenshot({ path: join(shots, "run.png"), fullPage: true });
});

test("the file the run wrote opens from its link", async () => {
  await alice.getByRole("link", { name: "reviews/2.0.md" }).click();
  await alice.getByRole("heading", { name: "reviews/2.0.md" }).waitFor();
  const text = await alice.locator("pre.file").textContent();
  assert.match(text, /Verdict: ship/);
  assert.match(text, /All <checks> green/);
});

test("a run started from the workflow page can be cancelled", async () => {
  await alice.goto(`${base}/workflows/slow`);
  assert.deepEqual(await unlabelled(alice), []);
  await alice.getByRole("button", { name: "Start" }).click();
  await alice.waitForURL(/\/runs\/[0-9a-f-]+$/);
  await alice.locator("#live-summary .badge.running").waitFor();
  await alice.getByRole("button", { name: "Cancel the run" }).click();
  await alice.locator("#live-summary .badge.cancelled").waitFor(WAIT);
});

test("a failed run is retried as a new run that keeps what succeeded", async () => {
  await alice.goto(`${base}/workflows/broken`);
  await alice.getByRole("button", { name: "Start" }).click();
  await alice.locator("#live-summary .badge.failed").waitFor(WAIT);
  // The failed node's attempt: its outcome and the arguments it was called with.
  const attempt = alice.locator("#node-fail + tr table.calls tbody tr").first();
  assert.match(await attempt.textContent(), /not_found.*987654321/s);
  const failed = alice.url();
  await alice.getByRole("button", { name: "Retry, keeping what succeeded" }).click();
  await alice.getByText("This is the retry").waitFor();
  assert.notEqual(alice.url(), failed);
  await alice.getByRole("link", { name: new URL(failed).pathname.split("/").pop() }).waitFor();
});

test("a node's attempts show each one's times, error and the delay before its retry", async () => {
  await alice.goto(`${base}/workflows/flaky`);
  await alice.getByRole("button", { name: "Start" }).click();
  await alice.locator("#live-summary .badge.failed").waitFor(WAIT);
  const rows = alice.locator("#node-flaky + tr table.attempts tbody tr");
  assert.equal(await rows.count(), 2);
  assert.match(await rows.nth(0).textContent(), /^1.*failed timeout: .*timed out after 50ms.*after 100 ms$/s);
  assert.match(await rows.nth(1).textContent(), /^2.*failed$/s);
});

test("the todos page lists the todo the run made", async () => {
  await alice.goto(`${base}/todos`);
  await alice.getByRole("cell", { name: "release 2.0: ship" }).waitFor();
  assert.deepEqual(await unlabelled(alice), []);
  await alice.screenshot({ path: join(shots, "todos.png"), fullPage: true });
});

test("a second principal sees none of the first one's runs", async () => {
  const bob = await signedIn(process.env.BOB);
  await bob.getByText("No run matches.").waitFor();
  const reply = await bob.goto(`${base}/runs/${askedRun}`);
  assert.equal(reply.status(), 404);
  await bob.context().close();
});

test("a cross-site POST is refused", async () => {
  const other = await alice.context().newPage();
  await other.setContent(
    `<form method="post" action="${base}/runs/${askedRun}/retry"><button>go</button></form>`,
  );
  const [reply] = await Promise.all([other.waitForNavigation(), other.getByRole("button", { name: "go" }).click()]);
  assert.equal(reply.status(), 403);
  await other.close();
});
