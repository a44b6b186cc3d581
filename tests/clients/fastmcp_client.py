"""Drives the server with FastMCP's client (`fastmcp` 4.x) over stdio or HTTP.

    python fastmcp_client.py '<ADR planner arguments as JSON>' -- <server command...>
    python fastmcp_client.py '<ADR planner arguments as JSON>' --url <http://.../mcp>
    python fastmcp_client.py '{"workflow": "<name>", "arguments": {...}}' (-- ... | --url ...)
    python fastmcp_client.py memory (-- <server command...> | --url <http://.../mcp>)

Lists the prompts and gets the workflow's (the ADR planner's by default), runs it with the
arguments given (every answer up front, so nothing is asked), prints its result, and reads
the file its result links last (`resource_link`): the ADR, or the report.

With `memory`: the workflows' memory, every answer up front (scenarios.json `memory`):
deployment_readiness twice to one environment (the trend, a recurring check);
troubleshoot, rated with troubleshoot_outcome (its report read through the result's
link), then a session alike that shows the rating; troubleshoot_outcome of a run that is
no session, refused; the prompt of troubleshoot_outcome.

Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any failure
after printing {"event": "fatal", "message": ...}.
"""

import asyncio
import json
import pathlib
import sys
import traceback

from fastmcp import Client
from fastmcp.client.transports import StdioTransport


def emit(event, **fields):
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


async def main(arguments, transport):
    workflow = arguments.get("workflow", "interactive_adr_planning")
    arguments = arguments.get("arguments", arguments)
    prompt_arguments = {"title": arguments["title"]} if "title" in arguments else {}
    async with Client(transport) as client:
        prompts = await client.list_prompts()
        emit("prompts", names=[prompt.name for prompt in prompts])
        prompt = await client.get_prompt(workflow, prompt_arguments)
        emit("prompt", text=prompt.messages[0].content.text)
        result = await client.call_tool(workflow, arguments)
        emit("result", result={"isError": result.is_error, "structuredContent": result.structured_content})
        emit("output", output=result.structured_content["data"]["output"])
        links = [block for block in result.content if block.type == "resource_link"]
        emit("links", uris=[str(link.uri) for link in links])
        contents = await client.read_resource(str(links[-1].uri))
        emit("read", uri=str(links[-1].uri), text=contents[0].text, mimeType=contents[0].mimeType)


async def memory(transport):
    data = json.loads((pathlib.Path(__file__).parent / "scenarios.json").read_text())["memory"]
    async with Client(transport) as client:
        prompts = await client.list_prompts()
        emit("prompts", names=[prompt.name for prompt in prompts])
        prompt = await client.get_prompt("troubleshoot_outcome", {"run_id": "r-1"})
        emit("prompt", text=prompt.messages[0].content.text)

        checked = []
        for arguments in data["readiness"]:
            ran = await client.call_tool("deployment_readiness", arguments)
            checked.append(ran.structured_content)
        emit("readiness", results=checked)

        first = await client.call_tool("troubleshoot", data["sessions"][0])
        run_id = first.structured_content["data"]["run_id"]
        rated = await client.call_tool("troubleshoot_outcome", {"run_id": run_id, **data["outcome"]})
        links = [block for block in rated.content if block.type == "resource_link"]
        report = await client.read_resource(str(links[0].uri))
        emit("rated", runId=run_id, result=rated.structured_content, report=report[0].text)

        after = await client.call_tool("troubleshoot", data["sessions"][1])
        emit("session", result=after.structured_content)

        refused = await client.call_tool(
            "troubleshoot_outcome", {"run_id": "no-such-run", "rating": "fixed"}, raise_on_error=False
        )
        emit("refused", isError=refused.is_error, result=refused.structured_content)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] not in ("--", "--url"):
        print("usage: python fastmcp_client.py ('<arguments>' | memory) (-- <server command...> | --url <url>)", file=sys.stderr)
        sys.exit(2)
    # A URL is served over Streamable HTTP by FastMCP's own transport.
    transport = argv[2] if argv[1] == "--url" else StdioTransport(command=argv[2], args=argv[3:])
    try:
        run = memory(transport) if argv[0] == "memory" else main(json.loads(argv[0]), transport)
        asyncio.run(run)
        emit("done")
    except Exception as error:  # noqa: BLE001 - the test reads the message
        emit("fatal", message=f"{type(error).__name__}: {error}", trace=traceback.format_exc())
        sys.exit(1)
