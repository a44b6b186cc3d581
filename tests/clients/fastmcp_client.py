"""Drives the server with FastMCP's client (`fastmcp` 4.x) over stdio.

    python fastmcp_client.py '<ADR planner arguments as JSON>' -- <server command...>
    python fastmcp_client.py '<ADR planner arguments as JSON>' --url <http://.../mcp>
    python fastmcp_client.py '{"workflow": "<name>", "arguments": {...}}' -- <server command...>

Lists the prompts and gets the workflow's (the ADR planner's by default), runs it with the
arguments given (every answer up front, so nothing is asked), and reads the file its result
links last (`resource_link`): the ADR, or the report.

Prints one JSON object per line on stdout: {"event": ..., ...}. Exits 1 on any failure
after printing {"event": "fatal", "message": ...}.
"""

import asyncio
import json
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
        emit("output", output=result.structured_content["data"]["output"])
        links = [block for block in result.content if block.type == "resource_link"]
        emit("links", uris=[str(link.uri) for link in links])
        contents = await client.read_resource(str(links[-1].uri))
        emit("read", uri=str(links[-1].uri), text=contents[0].text, mimeType=contents[0].mimeType)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] not in ("--", "--url"):
        print("usage: python fastmcp_client.py '<arguments>' (-- <server command...> | --url <url>)", file=sys.stderr)
        sys.exit(2)
    # A URL is served over Streamable HTTP by FastMCP's own transport.
    transport = argv[2] if argv[1] == "--url" else StdioTransport(command=argv[2], args=argv[3:])
    try:
        asyncio.run(main(json.loads(argv[0]), transport))
        emit("done")
    except Exception as error:  # noqa: BLE001 - the test reads the message
        emit("fatal", message=f"{type(error).__name__}: {error}", trace=traceback.format_exc())
        sys.exit(1)
