"""Drives the server with the official Python SDK (`mcp` 2.x).

    python py_sdk.py <scenario> -- <server command...>

Scenarios:
  legacy-elicit  a ClientSession over stdio with an elicitation callback, initialize
                 handshake (2025-11-25): call_tool("ask") asked directly during the call
  auto-todos     mcp.client.Client in mode="auto" (server/discover first): add_task and
                 list_tasks
  auto-rounds    the same client: call_tool("ask"), whose question comes back as an
                 input_required round that the elicitation callback answers

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


SCENARIOS = {
    "legacy-elicit": legacy_elicit,
    "auto-todos": auto_todos,
    "auto-rounds": auto_rounds,
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
