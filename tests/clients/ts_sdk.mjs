// Drives the server with the official TypeScript SDK (1.x, protocol 2025-11-25).
//
//   node ts_sdk.mjs <scenario> -- <server command...>     (stdio)
//   node ts_sdk.mjs <scenario> --url <http://.../mcp>     (Streamable HTTP; a bearer token
//                                                          from TASKS_TEST_TOKEN, if set)
//
// Scenarios:
//   task-stream    callToolStream of `ask` as a task, its question answered by the
//                  client's elicitation handler; then listTasks and getTask
//   task-cancel    a task of `ask` cancelled while it waits; a second cancel refused
//   direct-elicit  a plain callTool of `ask`, asked by elicitation during the call
//   todos          plain callTool of add_task, then list_tasks
//   task-elsewhere a task of `ask` created with `params.task` on this server, then its
//                  result asked of a second server on the same database (the URL in
//                  TASKS_TEST_URL_B) by a second client, whose elicitation handler answers
//                  the question that the first server's run puts
//   stream:<workflow>  callToolStream of a built-in workflow as a task, with the arguments
//                  of tests/clients/scenarios.json: the client's sampling handler replies
//                  with the drafts listed there, its elicitation handler answers each form
//                  as listed (e.g. interactive_adr_planning: drafts each analysis, confirms
//                  each draft, states the problem and picks the first option)
//   direct:<workflow>  the same with a plain callTool, asked directly during the call
//   surface        listPrompts and getPrompt of the ADR planner; deployment_readiness run
//                  with every result up front, then readResource of the report it links;
//                  a task of `ask` whose summary resource is subscribed to as soon as the
//                  task exists, counting the notifications/resources/updated it brings
//   memory         the workflows' memory, every answer up front (scenarios.json `memory`):
//                  deployment_readiness twice to one environment (the trend, a recurring
//                  check); troubleshoot, rated with troubleshoot_outcome (its report read
//                  through the result's link), then a session alike that shows the rating;
//                  troubleshoot_outcome of a run that is no session, refused; the prompt of
//                  troubleshoot_outcome
//
// Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any
// failure after printing {"event": "fatal", "message": ...}.

import { readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const emit = (event, fields = {}) =>
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");

const [scenario, dashes, command, ...args] = process.argv.slice(2);
if (!["--", "--url"].includes(dashes) || !command) {
  console.error("usage: node ts_sdk.mjs <scenario> (-- <server command...> | --url <url>)");
  process.exit(2);
}

// `stream:<workflow>` and `direct:<workflow>` run a built-in workflow of scenarios.json,
// which needs a model as well as a person.
const [mode, flow] = scenario?.includes(":") ? scenario.split(":") : [scenario, null];
const withModel = flow !== null;
const client = new Client(
  { name: "ts-sdk-real-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} }, ...(withModel ? { sampling: {} } : {}) } },
);

const relatedTask = (params) =>
  params._meta?.["io.modelcontextprotocol/related-task"] ?? null;

// A person approving whatever is asked, on client `via` (the second client's events say
// which one was asked).
const approve = (via) => async (request) => {
  emit("elicitation", {
    message: request.params.message,
    mode: request.params.mode ?? null,
    requestedSchema: request.params.requestedSchema,
    relatedTask: relatedTask(request.params),
    via,
  });
  return { action: "accept", content: { ok: true } };
};

client.setRequestHandler(ElicitRequestSchema, async (request) => {
  if (withModel) {
    const { name, answer } = answerFor(flow, request.params);
    emit("question", {
      method: request.method,
      asks: name,
      relatedTask: relatedTask(request.params),
    });
    return answer;
  }
  return approve("first")(request);
});

// The SDK refuses a sampling handler to a client that declares no sampling.
if (withModel) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    const prompt = request.params.messages[0].content.text;
    const { name, text } = draftFor(flow, prompt);
    emit("question", {
      method: request.method,
      asks: name,
      relatedTask: relatedTask(request.params),
      systemPrompt: request.params.systemPrompt ?? null,
      maxTokens: request.params.maxTokens,
    });
    return {
      role: "assistant",
      model: "ts-test-model",
      stopReason: "endTurn",
      content: { type: "text", text },
    };
  });
}

// What the model drafts and what the person answers, per workflow, as data the Rust tests
// and the other client scripts share.
const SCENARIOS = JSON.parse(
  readFileSync(new URL("./scenarios.json", import.meta.url), "utf8"),
);

// The model's reply to a prompt of the workflow: the first draft whose `prompt` the prompt
// contains; JSON fenced, as models write it, or plain text.
function draftFor(flow, prompt) {
  const found = SCENARIOS[flow].drafts.find((d) => prompt.includes(d.prompt));
  if (!found) throw new Error(`a sampling prompt ${flow} does not send: ${prompt}`);
  const text = found.text ??
    "Here is the draft:\n```json\n" + JSON.stringify(found.json, null, 2) + "\n```";
  return { name: found.asks, text };
}

// A person's answer to a form of the workflow: the whole content of a form whose message
// a rule names, else each field by its rule (a value, an option of its enum, or the form's
// default, i.e. a draft confirmed as the model wrote it).
function answerFor(flow, params) {
  const forms = SCENARIOS[flow].forms;
  const whole = forms.find((f) => f.message && params.message.includes(f.message));
  if (whole) return { name: whole.asks, answer: { action: "accept", content: whole.content } };
  const content = {};
  let name = null;
  for (const [field, schema] of Object.entries(params.requestedSchema.properties)) {
    let rule = forms.find((f) => f.field === field);
    if (rule) {
      content[field] = rule.enum !== undefined ? schema.enum[rule.enum] : rule.value;
    } else if ((rule = forms.find((f) => f.default)) && typeof schema.default === "string") {
      content[field] = schema.default;
    } else {
      throw new Error(`a form field ${flow} does not ask: ${field}`);
    }
    if (rule.asks) name = rule.asks.replace("{field}", field);
  }
  return { name, answer: { action: "accept", content } };
}

const notifications = [];
client.fallbackNotificationHandler = async (notification) => {
  notifications.push(notification);
};

const errorFields = (error) => ({
  code: error instanceof McpError ? error.code : null,
  message: String(error?.message ?? error),
});

async function taskStream() {
  const tools = await client.listTools();
  const ask = tools.tools.find((t) => t.name === "ask");
  emit("tools", {
    serverTasks: client.getServerCapabilities()?.tasks ?? null,
    askExecution: ask?.execution ?? null,
  });
  const progress = [];
  const stream = client.experimental.tasks.callToolStream(
    { name: "ask", arguments: { who: "ts" } },
    undefined,
    { task: { ttl: 60000 }, onprogress: (p) => progress.push(p) },
  );
  let taskId;
  for await (const message of stream) {
    switch (message.type) {
      case "taskCreated":
        taskId = message.task.taskId;
        emit("taskCreated", { task: message.task });
        break;
      case "taskStatus":
        emit("taskStatus", { status: message.task.status, taskId: message.task.taskId });
        break;
      case "result":
        emit("result", { result: message.result });
        break;
      case "error":
        emit("streamError", errorFields(message.error));
        break;
    }
  }
  const listed = await client.experimental.tasks.listTasks();
  emit("listTasks", { tasks: listed.tasks, nextCursor: listed.nextCursor ?? null });
  const got = await client.experimental.tasks.getTask(taskId);
  emit("getTask", { task: got });
  emit("notifications", {
    taskStatus: notifications
      .filter((n) => n.method === "notifications/tasks/status")
      .map((n) => n.params.status),
    progress: progress.length,
  });
}

async function taskCancel() {
  await client.listTools();
  const stream = client.experimental.tasks.callToolStream(
    { name: "ask", arguments: { who: "nobody" } },
    undefined,
    { task: { ttl: 60000 } },
  );
  let taskId;
  for await (const message of stream) {
    if (message.type === "taskCreated") {
      taskId = message.task.taskId;
      emit("taskCreated", { task: message.task });
      const cancelled = await client.experimental.tasks.cancelTask(taskId);
      emit("cancelled", { task: cancelled });
    } else if (message.type === "taskStatus") {
      emit("taskStatus", { status: message.task.status });
    } else if (message.type === "result") {
      emit("result", { result: message.result });
    } else if (message.type === "error") {
      emit("streamError", errorFields(message.error));
    }
  }
  try {
    const again = await client.experimental.tasks.cancelTask(taskId);
    emit("secondCancel", { ok: true, task: again });
  } catch (error) {
    emit("secondCancel", { ok: false, ...errorFields(error) });
  }
  const got = await client.experimental.tasks.getTask(taskId);
  emit("getTask", { task: got });
}

async function directElicit() {
  await client.listTools();
  const result = await client.callTool({ name: "ask", arguments: { who: "direct" } });
  emit("result", { result });
}

async function taskElsewhere() {
  await client.listTools();
  const created = await client.request(
    {
      method: "tools/call",
      params: { name: "ask", arguments: { who: "elsewhere" }, task: { ttl: 60000 } },
    },
    CreateTaskResultSchema,
  );
  const taskId = created.task.taskId;
  emit("taskCreated", { task: created.task });
  // The first client goes away; its server drives the run, which soon asks.
  await client.close();
  const second = new Client(
    { name: "ts-sdk-second-client", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  second.setRequestHandler(ElicitRequestSchema, approve("second"));
  await second.connect(httpTransport(process.env.TASKS_TEST_URL_B));
  const result = await second.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  emit("result", { result });
  const got = await second.experimental.tasks.getTask(taskId);
  emit("getTask", { task: got });
  await second.close();
}

async function todos() {
  const added = await client.callTool({ name: "add_task", arguments: { title: "over HTTP" } });
  emit("added", { result: added });
  const listed = await client.callTool({ name: "list_tasks", arguments: {} });
  emit("listed", { result: listed });
}

async function workflowStream() {
  const tools = await client.listTools();
  const tool = tools.tools.find((t) => t.name === flow);
  emit("tools", { execution: tool?.execution ?? null });
  const stream = client.experimental.tasks.callToolStream(
    { name: flow, arguments: SCENARIOS[flow].arguments },
    undefined,
    { task: { ttl: 600000 } },
  );
  for await (const message of stream) {
    switch (message.type) {
      case "taskCreated":
        emit("taskCreated", { task: message.task });
        break;
      case "taskStatus":
        emit("taskStatus", { status: message.task.status });
        break;
      case "result":
        emit("result", { result: message.result });
        break;
      case "error":
        emit("streamError", errorFields(message.error));
        break;
    }
  }
}

async function workflowDirect() {
  await client.listTools();
  const result = await client.callTool({ name: flow, arguments: SCENARIOS[flow].arguments });
  emit("result", { result });
}

async function surface() {
  const prompts = await client.listPrompts();
  emit("prompts", { names: prompts.prompts.map((p) => p.name) });
  const prompt = await client.getPrompt({
    name: "interactive_adr_planning",
    arguments: { title: "Pick a queue" },
  });
  emit("prompt", { text: prompt.messages[0].content.text });

  const inputs = { version: "1.0", checks: ["tests"], results: [{ check: "tests", passed: true }] };
  const ran = await client.callTool({ name: "deployment_readiness", arguments: inputs });
  const link = ran.content.find((c) => c.type === "resource_link");
  const read = await client.readResource({ uri: link.uri });
  emit("read", { uri: link.uri, contents: read.contents });

  const updates = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    updates.push(notification.params.uri);
  });
  let uri = null;
  const stream = client.experimental.tasks.callToolStream(
    { name: "ask", arguments: { who: "subscriber" } },
    undefined,
    { task: { ttl: 600000 } },
  );
  for await (const message of stream) {
    if (message.type === "taskCreated") {
      uri = `tasks://runs/${message.task.taskId}/summary.md`;
      await client.subscribeResource({ uri });
    } else if (message.type === "result") {
      emit("result", { result: message.result });
    }
  }
  // The last update may trail the result by a tick of the server's watch.
  for (let i = 0; i < 40 && !updates.includes(uri); i++) {
    await new Promise((done) => setTimeout(done, 50));
  }
  const summary = await client.readResource({ uri });
  emit("followed", { uri, updates: updates.filter((u) => u === uri).length, summary: summary.contents[0].text });
}

async function memory() {
  const data = SCENARIOS.memory;
  const prompts = await client.listPrompts();
  emit("prompts", { names: prompts.prompts.map((p) => p.name) });
  const prompt = await client.getPrompt({
    name: "troubleshoot_outcome",
    arguments: { run_id: "r-1" },
  });
  emit("prompt", { text: prompt.messages[0].content.text });

  const checked = [];
  for (const args of data.readiness) {
    const ran = await client.callTool({ name: "deployment_readiness", arguments: args });
    checked.push(ran.structuredContent);
  }
  emit("readiness", { results: checked });

  const first = await client.callTool({ name: "troubleshoot", arguments: data.sessions[0] });
  const runId = first.structuredContent.data.run_id;
  const rated = await client.callTool({
    name: "troubleshoot_outcome",
    arguments: { run_id: runId, ...data.outcome },
  });
  const link = rated.content.find((c) => c.type === "resource_link");
  const report = await client.readResource({ uri: link.uri });
  emit("rated", { runId, result: rated.structuredContent, report: report.contents[0].text });

  const next = await client.callTool({ name: "troubleshoot", arguments: data.sessions[1] });
  emit("session", { result: next.structuredContent });

  const refused = await client.callTool({
    name: "troubleshoot_outcome",
    arguments: { run_id: "no-such-run", rating: "fixed" },
  });
  emit("refused", { isError: refused.isError ?? false, result: refused.structuredContent });
}

const scenarios = {
  surface,
  memory,
  "task-stream": taskStream,
  "task-cancel": taskCancel,
  "direct-elicit": directElicit,
  "task-elsewhere": taskElsewhere,
  todos,
  stream: workflowStream,
  direct: workflowDirect,
};

const run = flow && !SCENARIOS[flow] ? undefined : scenarios[mode];
if (!run) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}

function httpTransport(url) {
  const token = process.env.TASKS_TEST_TOKEN;
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}

const transport = dashes === "--url"
  ? httpTransport(command)
  : new StdioClientTransport({ command, args, stderr: "inherit" });
// The client hands the negotiated version to the transport, which keeps it for HTTP.
let protocolVersion = null;
const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  protocolVersion = version;
  setProtocolVersion?.(version);
};
try {
  await client.connect(transport);
  emit("connected", { protocolVersion, server: client.getServerVersion() });
  await run();
  await client.close();
  emit("done");
} catch (error) {
  emit("fatal", errorFields(error));
  await client.close().catch(() => {});
  process.exit(1);
}
