// Drives the server with the official TypeScript SDK (1.x, protocol 2025-11-25).
//
//   node ts_sdk.mjs <scenario> -- <server command...>
//
// Scenarios:
//   task-stream    callToolStream of `ask` as a task, its question answered by the
//                  client's elicitation handler; then listTasks and getTask
//   task-cancel    a task of `ask` cancelled while it waits; a second cancel refused
//   direct-elicit  a plain callTool of `ask`, asked by elicitation during the call
//
// Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any
// failure after printing {"event": "fatal", "message": ...}.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const emit = (event, fields = {}) =>
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");

const [scenario, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--" || !command) {
  console.error("usage: node ts_sdk.mjs <scenario> -- <server command...>");
  process.exit(2);
}

const client = new Client(
  { name: "ts-sdk-real-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);

const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicitations.push(request.params);
  emit("elicitation", {
    message: request.params.message,
    mode: request.params.mode ?? null,
    requestedSchema: request.params.requestedSchema,
    relatedTask: request.params._meta?.["io.modelcontextprotocol/related-task"] ?? null,
  });
  return { action: "accept", content: { ok: true } };
});

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

const scenarios = {
  "task-stream": taskStream,
  "task-cancel": taskCancel,
  "direct-elicit": directElicit,
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
