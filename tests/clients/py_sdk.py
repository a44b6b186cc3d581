"""Drives the server with the official Python SDK (`mcp` 2.x).

    python py_sdk.py <scenario> -- <server command...>     (stdio)
    python py_sdk.py <scenario> --url <http://.../mcp>     (Streamable HTTP; auto-* scenarios)

Scenarios:
  legacy-elicit  a ClientSession over stdio with an elicitation callback, initialize
                 handshake (2025-11-25): call_tool("ask") asked directly during the call
  auto-todos     mcp.client.Client in mode="auto" (server/discover first): add_task and
                 list_tasks
  auto-rounds    the same client: call_tool("ask"), whose question comes back as an
                 input_required round that the elicitation callback answers
  auto:<workflow>  the same client, with a sampling callback too: call_tool of a built-in
                 workflow with the arguments of scenarios.json, its questions answered round
                 by round (the sampling callback replies with the drafts listed there, the
                 elicitation callback answers each form as listed); the result says how
                 many rounds the call took

  auto-surface   the same client: list_prompts and get_prompt of the ADR planner (with
                 the list's cache hints), complete its `status`, run deployment_readiness
                 with every result up front and read the report it links

Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any failure
after printing {"event": "fatal", "message": ...}.
"""

import json
import pathlib
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


# What the model drafts and what the person answers, per workflow, as data the Rust tests
# and the other client scripts share.
with open(pathlib.Path(__file__).with_name("scenarios.json"), encoding="utf-8") as file:
    WORKFLOWS = json.load(file)

# A workflow asks its questions in rounds, one per question or several at once (a fan-out):
# interactive_adr_planning takes ten, which the SDK's default cap of 10 just fits with no
# room for a question asked again after an answer that did not fit, so the cap is raised
# as docs/tasks-and-clients.md advises.
MAX_ROUNDS = 20


def draft_for(flow, prompt):
    """The model's reply to a prompt of the workflow: the first draft whose `prompt` the
    prompt contains; JSON fenced, as models write it, or plain text."""
    found = next((d for d in WORKFLOWS[flow]["drafts"] if d["prompt"] in prompt), None)
    if found is None:
        raise RuntimeError(f"a sampling prompt {flow} does not send: {prompt}")
    text = found.get("text")
    if text is None:
        text = "Here is the draft:\n```json\n" + json.dumps(found["json"], indent=2) + "\n```"
    return found["asks"], text


def answer_for(flow, message, schema):
    """A person's answer to a form of the workflow: the whole content of a form whose
    message a rule names, else each field by its rule (a value, an option of its enum, or
    the form's default, i.e. a draft confirmed as the model wrote it)."""
    forms = WORKFLOWS[flow]["forms"]
    whole = next((f for f in forms if "message" in f and f["message"] in message), None)
    if whole is not None:
        return whole["asks"], whole["content"]
    content, asks = {}, None
    for field, prop in schema["properties"].items():
        rule = next((f for f in forms if f.get("field") == field), None)
        if rule is not None:
            content[field] = prop["enum"][rule["enum"]] if "enum" in rule else rule["value"]
        else:
            rule = next((f for f in forms if f.get("default")), None)
            if rule is None or not isinstance(prop.get("default"), str):
                raise RuntimeError(f"a form field {flow} does not ask: {field}")
            content[field] = prop["default"]
        if "asks" in rule:
            asks = rule["asks"].replace("{field}", field)
    return asks, content


class Rounds:
    """Counts the `input_required` rounds of one call by its retries (each carries the
    round's answers or its request state); the questions of round n come before retry n."""

    def __init__(self, session):
        self.retries = 0
        call_tool = session.call_tool

        async def counted(*args, **kwargs):
            if kwargs.get("request_state") is not None or kwargs.get("input_responses"):
                self.retries += 1
            return await call_tool(*args, **kwargs)

        session.call_tool = counted


def auto_workflow(flow):
    async def scenario(server):
        rounds = None

        async def sample(context, params):
            content = params.messages[0].content
            prompt = content.text if hasattr(content, "text") else content[0].text
            asks, text = draft_for(flow, prompt)
            emit("question", method="sampling/createMessage", asks=asks, round=rounds.retries + 1,
                 systemPrompt=params.system_prompt, maxTokens=params.max_tokens)
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=text),
                model="py-test-model",
                stop_reason="endTurn",
            )

        async def elicit(context, params):
            asks, content = answer_for(flow, params.message, params.requested_schema)
            emit("question", method="elicitation/create", asks=asks, round=rounds.retries + 1)
            return types.ElicitResult(action="accept", content=content)

        async with Client(
            server,
            mode="auto",
            elicitation_callback=elicit,
            sampling_callback=sample,
            input_required_max_rounds=MAX_ROUNDS,
        ) as client:
            emit("connected", protocolVersion=client.protocol_version)
            rounds = Rounds(client.session)
            result = await client.call_tool(flow, WORKFLOWS[flow]["arguments"])
            emit("result", result=dump(result), rounds=rounds.retries)

    return scenario


async def auto_surface(server):
    async with Client(server, mode="auto", elicitation_callback=approve) as client:
        prompts = await client.list_prompts()
        listed = dump(prompts)
        emit("prompts", names=[p["name"] for p in listed["prompts"]], ttlMs=listed.get("ttlMs"))
        prompt = await client.get_prompt("interactive_adr_planning", {"title": "Pick a queue"})
        emit("prompt", text=dump(prompt)["messages"][0]["content"]["text"])
        completed = await client.complete(
            types.PromptReference(type="ref/prompt", name="interactive_adr_planning"),
            {"name": "status", "value": "Acc"},
        )
        emit("completed", values=dump(completed)["completion"]["values"])
        inputs = {"version": "1.0", "checks": ["tests"], "results": [{"check": "tests", "passed": True}]}
        ran = dump(await client.call_tool("deployment_readiness", inputs))
        link = next(c for c in ran["content"] if c["type"] == "resource_link")
        read = await client.read_resource(link["uri"])
        emit("read", uri=link["uri"], contents=dump(read)["contents"])


SCENARIOS = {
    "auto-surface": auto_surface,
    "legacy-elicit": legacy_elicit,
    "auto-todos": auto_todos,
    "auto-rounds": auto_rounds,
}
SCENARIOS.update({f"auto:{flow}": auto_workflow(flow) for flow in WORKFLOWS})


def main():
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] not in ("--", "--url") or argv[0] not in SCENARIOS:
        print(
            f"usage: python py_sdk.py <{'|'.join(SCENARIOS)}> (-- <server command...> | --url <url>)",
            file=sys.stderr,
        )
        sys.exit(2)
    scenario, command, args = argv[0], argv[2], argv[3:]
    # A URL is served over Streamable HTTP by the client's own transport.
    server = command if argv[1] == "--url" else StdioServerParameters(command=command, args=args)
    try:
        anyio.run(SCENARIOS[scenario], server)
        emit("done")
    except BaseException as error:  # an ExceptionGroup from the task group, too
        traceback.print_exc()
        emit("fatal", message=repr(error))
        sys.exit(1)


if __name__ == "__main__":
    main()
