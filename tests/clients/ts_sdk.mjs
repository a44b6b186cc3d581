// Drives the server with the official TypeScript SDK (1.x, protocol 2025-11-25).
//
//   node ts_sdk.mjs <scenario> -- <server command...>
//
// Scenarios:
//   task-stream    callToolStream of `ask` as a task, its question answered by the
//                  client's elicitation handler; then listTasks and getTask
//   task-cancel    a task of `ask` cancelled while it waits; a second cancel refused
//   direct-elicit  a plain callTool of `ask`, asked by elicitation during the call
//   adr-stream     callToolStream of `interactive_adr_planning` as a task: the client's
//                  sampling handler drafts each analysis, its elicitation handler confirms
//                  each draft, states the problem and picks the first option
//   adr-direct     the same with a plain callTool, asked directly during the call
//
// Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any
// failure after printing {"event": "fatal", "message": ...}.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

const emit = (event, fields = {}) =>
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");

const [scenario, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--" || !command) {
  console.error("usage: node ts_sdk.mjs <scenario> -- <server command...>");
  process.exit(2);
}

// The ADR scenarios need a model as well as a person.
const adr = scenario?.startsWith("adr-");
const client = new Client(
  { name: "ts-sdk-real-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} }, ...(adr ? { sampling: {} } : {}) } },
);

const relatedTask = (params) =>
  params._meta?.["io.modelcontextprotocol/related-task"] ?? null;

client.setRequestHandler(ElicitRequestSchema, async (request) => {
  if (adr) {
    const { name, answer } = adrAnswer(request.params);
    emit("question", {
      method: request.method,
      asks: name,
      relatedTask: relatedTask(request.params),
    });
    return answer;
  }
  emit("elicitation", {
    message: request.params.message,
    mode: request.params.mode ?? null,
    requestedSchema: request.params.requestedSchema,
    relatedTask: relatedTask(request.params),
  });
  return { action: "accept", content: { ok: true } };
});

// The SDK refuses a sampling handler to a client that declares no sampling.
if (adr) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    const prompt = request.params.messages[0].content.text;
    const { name, text } = adrDraft(prompt);
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

// What the model drafts for each analysis phase of the ADR planner, by what its prompt
// asks for; fenced, as models write JSON.
const DRAFTS = [
  ["List the research findings", "findings", [
    { source: "incident 42", insight: "events dropped on deploy", relevance: "high" },
  ]],
  ["List two to five options", "options", [
    { name: "Queue", description: "A durable queue in front of billing", pros: ["durable"],
      cons: ["ops cost"], risks: ["new infra"], effort: "medium", confidence: 80 },
    { name: "Client retries", description: "Retry on failure", pros: ["cheap"],
      cons: ["lossy"], effort: "low", confidence: 40 },
  ]],
  ["Assess the decision's impacts", "impacts", {
    technical: ["a new dependency"], business: ["no lost revenue"],
    team: ["on-call for the queue"], risks: ["queue outage"],
    dependencies: ["the queue service"],
  }],
  ["Plan the implementation", "plan", {
    phases: ["pilot", "rollout"],
    tasks: [
      { description: "Provision the queue", priority: "high", effort: "2d" },
      { description: "Switch the producer to the queue", priority: "critical", effort: "1d",
        assignee: "ann" },
    ],
    timeline: "Q1",
    successCriteria: ["no lost events for a month"],
  }],
];

function adrDraft(prompt) {
  const found = DRAFTS.find(([asks]) => prompt.includes(asks));
  if (!found) throw new Error(`a sampling prompt the ADR planner does not send: ${prompt}`);
  const [, phase, data] = found;
  return {
    name: `draft ${phase}`,
    text: "Here is the draft:\n```json\n" + JSON.stringify(data, null, 2) + "\n```",
  };
}

// A person who states the problem, confirms every draft as the model wrote it (the form's
// default), and chooses the first option.
function adrAnswer(params) {
  const properties = params.requestedSchema.properties;
  const content = {};
  let name = null;
  for (const [field, schema] of Object.entries(properties)) {
    if (field === "statement") {
      name = "problem";
      content[field] = "Billing events are lost when billing restarts.";
    } else if (field === "choice") {
      name = "decision";
      content[field] = schema.enum[0];
    } else if (field === "rationale") {
      content[field] = "Durability matters most";
    } else if (field === "tradeoffs") {
      content[field] = "more to operate\nslower deploys";
    } else if (typeof schema.default === "string") {
      name = `review ${field}`;
      content[field] = schema.default;
    } else {
      throw new Error(`a form field the ADR planner does not ask: ${field}`);
    }
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

const ADR_TITLE = "Queue for billing events";

async function adrStream() {
  const tools = await client.listTools();
  const planner = tools.tools.find((t) => t.name === "interactive_adr_planning");
  emit("tools", { plannerExecution: planner?.execution ?? null });
  const stream = client.experimental.tasks.callToolStream(
    { name: "interactive_adr_planning", arguments: { title: ADR_TITLE } },
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

async function adrDirect() {
  await client.listTools();
  const result = await client.callTool({
    name: "interactive_adr_planning",
    arguments: { title: ADR_TITLE },
  });
  emit("result", { result });
}

const scenarios = {
  "task-stream": taskStream,
  "task-cancel": taskCancel,
  "direct-elicit": directElicit,
  "adr-stream": adrStream,
  "adr-direct": adrDirect,
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
// The client hands the negotiated version to a transport that takes it; stdio keeps none.
let protocolVersion = null;
transport.setProtocolVersion = (version) => {
  protocolVersion = version;
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
