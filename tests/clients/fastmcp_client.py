"""Drives the server with FastMCP's client (`fastmcp` 4.x) over stdio.

    python fastmcp_client.py '<ADR planner arguments as JSON>' -- <server command...>
    python fastmcp_client.py '<ADR planner arguments as JSON>' --url <http://.../mcp>
    python fastmcp_client.py '{"workflow": NAME, "arguments": {...}}' (-- ... | --url ...)

Lists the prompts and gets the ADR planner's, runs the planner with the arguments given
(every answer up front, so nothing is asked), and reads the ADR it wrote through the
`resource_link` of its result. Given a workflow's name, gets its prompt, calls its tool
with the arguments, prints the result and reads the report it links.

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


async def call_workflow(name, arguments, transport):
    async with Client(transport) as client:
        prompt = await client.get_prompt(name, {})
        emit("prompt", text=prompt.messages[0].content.text)
        result = await client.call_tool(name, arguments)
        emit("result", result={"isError": result.is_error, "structuredContent": result.structured_content})
        links = [block for block in result.content if block.type == "resource_link"]
        contents = await client.read_resource(str(links[0].uri))
        emit("read", uri=str(links[0].uri), text=contents[0].text, mimeType=contents[0].mimeType)


async def main(arguments, transport):
    if "workflow" in arguments:
        return await call_workflow(arguments["workflow"], arguments["arguments"], transport)
    async with Client(transport) as client:
        prompts = await client.list_prompts()
        emit("prompts", names=[prompt.name for prompt in prompts])
        prompt = await client.get_prompt("interactive_adr_planning", {"title": arguments["title"]})
        emit("prompt", text=prompt.messages[0].content.text)
        result = await client.call_tool("interactive_adr_planning", arguments)
        links = [block for block in result.content if block.type == "resource_link"]
        emit("links", uris=[str(link.uri) for link in links])
        contents = await client.read_resource(str(links[0].uri))
        emit("read", uri=str(links[0].uri), text=contents[0].text, mimeType=contents[0].mimeType)


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
