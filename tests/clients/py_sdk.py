"""Drives the server with the official Python SDK (`mcp` 2.x).

    python py_sdk.py <scenario> -- <server command...>

Scenarios:
  legacy-elicit  a ClientSession over stdio with an elicitation callback, initialize
                 handshake (2025-11-25): call_tool("ask") asked directly during the call
  auto-todos     mcp.client.Client in mode="auto" (server/discover first): add_task and
                 list_tasks
  auto-rounds    the same client: call_tool("ask"), whose question comes back as an
                 input_required round that the elicitation callback answers
  auto-adr       the same client, with a sampling callback too: call_tool of
                 interactive_adr_planning, its ten questions answered round by round (the
                 sampling callback drafts each analysis, the elicitation callback states the
                 problem, confirms each draft and picks the first option)

Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any failure
after printing {"event": "fatal", "message": ...}.
"""

import json
import sys
import traceback

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client


def emit(event, **fields):
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def approve(context, params):
    emit("elicitation", message=params.message, mode=getattr(params, "mode", None))
    return types.ElicitResult(action="accept", content={"ok": True})


async def legacy_elicit(server):
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=approve) as session:
            init = await session.initialize()
            emit(
                "initialized",
                protocolVersion=init.protocol_version,
                serverTasks=dump(init.capabilities).get("tasks"),
            )
            result = await session.call_tool("ask", {"who": "py"})
            emit("result", result=dump(result))


async def auto_todos(server):
    async with Client(server, mode="auto", elicitation_callback=approve) as client:
        emit(
            "connected",
            protocolVersion=client.protocol_version,
            extensions=sorted((dump(client.server_capabilities).get("extensions") or {}).keys()),
        )
        added = await client.call_tool("add_task", {"title": "from python", "tags": ["py"]})
        emit("added", result=dump(added))
        listed = await client.call_tool("list_tasks", {})
        emit("listed", result=dump(listed))


async def auto_rounds(server):
    async with Client(server, mode="auto", elicitation_callback=approve) as client:
        emit("connected", protocolVersion=client.protocol_version)
        result = await client.call_tool("ask", {"who": "rounds"})
        emit("result", result=dump(result))


# What the model drafts for each analysis phase of the ADR planner, by what its prompt asks
# for; fenced, as models write JSON.
DRAFTS = [
    ("List the research findings", "findings", [
        {"source": "incident 42", "insight": "events dropped on deploy", "relevance": "high"},
    ]),
    ("List two to five options", "options", [
        {"name": "Queue", "description": "A durable queue in front of billing", "pros": ["durable"],
         "cons": ["ops cost"], "risks": ["new infra"], "effort": "medium", "confidence": 80},
        {"name": "Client retries", "description": "Retry on failure", "pros": ["cheap"],
         "cons": ["lossy"], "effort": "low", "confidence": 40},
    ]),
    ("Assess the decision's impacts", "impacts", {
        "technical": ["a new dependency"], "business": ["no lost revenue"],
        "team": ["on-call for the queue"], "risks": ["queue outage"],
        "dependencies": ["the queue service"],
    }),
    ("Plan the implementation", "plan", {
        "phases": ["pilot", "rollout"],
        "tasks": [
            {"description": "Provision the queue", "priority": "high", "effort": "2d"},
            {"description": "Switch the producer to the queue", "priority": "critical",
             "effort": "1d", "assignee": "ann"},
        ],
        "timeline": "Q1",
        "successCriteria": ["no lost events for a month"],
    }),
]

# The planner asks its ten questions one after another, each in a round of its own: the
# SDK's default cap of 10 rounds just fits, with no room for a question asked again after
# an answer that did not fit, so the cap is raised as the README advises.
ADR_MAX_ROUNDS = 20


async def draft(context, params):
    content = params.messages[0].content
    prompt = content.text if hasattr(content, "text") else content[0].text
    found = next((d for d in DRAFTS if d[0] in prompt), None)
    if found is None:
        raise RuntimeError(f"a sampling prompt the ADR planner does not send: {prompt}")
    emit("question", method="sampling/createMessage", asks=f"draft {found[1]}",
         systemPrompt=params.system_prompt, maxTokens=params.max_tokens)
    text = "Here is the draft:\n```json\n" + json.dumps(found[2], indent=2) + "\n```"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=text),
        model="py-test-model",
        stop_reason="endTurn",
    )


async def confirm(context, params):
    """A person who states the problem, confirms every draft as the model wrote it (the
    form's default) and chooses the first option."""
    content, asks = {}, None
    for field, schema in params.requested_schema["properties"].items():
        if field == "statement":
            asks, content[field] = "problem", "Billing events are lost when billing restarts."
        elif field == "choice":
            asks, content[field] = "decision", schema["enum"][0]
        elif field == "rationale":
            content[field] = "Durability matters most"
        elif field == "tradeoffs":
            content[field] = "more to operate\nslower deploys"
        elif isinstance(schema.get("default"), str):
            asks, content[field] = f"review {field}", schema["default"]
        else:
            raise RuntimeError(f"a form field the ADR planner does not ask: {field}")
    emit("question", method="elicitation/create", asks=asks)
    return types.ElicitResult(action="accept", content=content)


async def auto_adr(server):
    async with Client(
        server,
        mode="auto",
        elicitation_callback=confirm,
        sampling_callback=draft,
        input_required_max_rounds=ADR_MAX_ROUNDS,
    ) as client:
        emit("connected", protocolVersion=client.protocol_version)
        result = await client.call_tool(
            "interactive_adr_planning", {"title": "Queue for billing events"}
        )
        emit("result", result=dump(result))


SCENARIOS = {
    "legacy-elicit": legacy_elicit,
    "auto-todos": auto_todos,
    "auto-rounds": auto_rounds,
    "auto-adr": auto_adr,
}


def main():
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] != "--" or argv[0] not in SCENARIOS:
        print(f"usage: python py_sdk.py <{'|'.join(SCENARIOS)}> -- <server command...>", file=sys.stderr)
        sys.exit(2)
    scenario, command, args = argv[0], argv[2], argv[3:]
    server = StdioServerParameters(command=command, args=args)
    try:
        anyio.run(SCENARIOS[scenario], server)
        emit("done")
    except BaseException as error:  # an ExceptionGroup from the task group, too
        traceback.print_exc()
        emit("fatal", message=repr(error))
        sys.exit(1)


if __name__ == "__main__":
    main()
