"""An MCP client on the official Python SDK's streamable HTTP transport,
against `cairn mcp --listen`.

Usage: http_client.py URL TOKEN
Connects with `Authorization: Bearer TOKEN`, lists the tools, lists the
sessions, and prints one JSON object of what it saw for the Rust test.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def main(url, token):
    seen = {}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as client:
                init = await client.initialize()
                seen["server"] = init.server_info.name
                tools = await client.list_tools()
                seen["tools"] = sorted(t.name for t in tools.tools)
                listed = await client.call_tool("list_sessions", {})
                seen["listed"] = json.loads(listed.content[0].text)
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1], sys.argv[2]))
