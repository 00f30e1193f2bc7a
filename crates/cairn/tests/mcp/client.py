"""An MCP client built on the official Python SDK, against `cairn mcp`.

Usage: client.py CAIRN SESSION_ID
Starts `CAIRN mcp` as a stdio server (its environment, CAIRN_STORE among it,
passed on), lists its tools, reads the session, rewinds its first turn and
undoes the rewind through the bank, asks for a session that is not there,
and prints one JSON object of what it saw for the Rust test to check.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(cairn, session):
    server = StdioServerParameters(command=cairn, args=["mcp"], env=dict(os.environ))
    seen = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as client:
            init = await client.initialize()
            seen["server"] = init.server_info.name
            tools = await client.list_tools()
            seen["tools"] = {
                t.name: {
                    "read_only": t.annotations.read_only_hint,
                    "destructive": t.annotations.destructive_hint,
                    "idempotent": t.annotations.idempotent_hint,
                    "open_world": t.annotations.open_world_hint,
                    "required": t.input_schema.get("required", []),
                }
                for t in tools.tools
            }
            listed = await client.call_tool("list_sessions", {})
            seen["listed"] = json.loads(text(listed))
            points = await client.call_tool("rewind_points", {"id": session})
            seen["points"] = json.loads(text(points))
            rewound = await client.call_tool("rewind", {"id": session, "to": "turn:1"})
            seen["rewound"] = json.loads(text(rewound))
            seen["after_rewind"] = os.path.exists("a.txt")
            bank = seen["rewound"]["bank"]["snapshot"]
            undone = await client.call_tool("rewind", {"id": session, "snapshot": bank})
            seen["undone_error"] = bool(undone.is_error)
            seen["after_undo"] = open("a.txt").read() if os.path.exists("a.txt") else None
            missing = await client.call_tool("show_session", {"id": "01HNOSUCHSESSION0000000000"})
            seen["missing"] = {"is_error": bool(missing.is_error), "text": text(missing)}
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1], sys.argv[2]))
