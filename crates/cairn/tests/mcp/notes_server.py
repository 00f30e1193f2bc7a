"""An MCP server built with the official Python SDK (mcp 2.x, `MCPServer`),
for `cairn run --mcp` (tests/mcp_client.rs). It keeps notes in its working
directory, and its tools declare each kind of annotation cairn acts on:

- `read_note`   readOnlyHint                   (re-run after a crash)
- `set_note`    idempotentHint, not read-only  (re-run after a crash, asks under --approve writes)
- `append_note` no hints at all: the protocol's defaults, destructive and not
                idempotent                     (`unknown` after a crash, never re-run)
- `crash`       readOnlyHint; exits the process mid-call the first time (the
                server dies under a call)
- `crash_write` no hints; exits the process mid-call the first time

Every call is logged in `calls.log` (one line, flushed) before it does
anything; while a file named `hold` exists, a call waits for it to go, so a
test can kill cairn with the call in flight. Each start appends its pid to
`server.pids`. It writes a line on standard
error at start, which cairn must keep out of the terminal unless asked.
With `--http PORT` it serves streamable HTTP instead of stdio.
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("notes")


async def logged(line: str) -> None:
    with open("calls.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    while os.path.exists("hold"):
        await asyncio.sleep(0.05)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def read_note(name: str) -> str:
    """Read the note called `name`."""
    await logged(f"read_note {name}")
    try:
        with open(f"{name}.note") as f:
            return f.read()
    except FileNotFoundError:
        return f"no note called {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True))
async def set_note(name: str, text: str) -> str:
    """Set the note called `name` to `text` (replacing it)."""
    await logged(f"set_note {name}")
    with open(f"{name}.note", "w") as f:
        f.write(text)
    return f"set {name}"


@server.tool()
async def append_note(name: str, text: str) -> str:
    """Append `text` to the note called `name`."""
    await logged(f"append_note {name}")
    with open(f"{name}.note", "a") as f:
        f.write(text)
    return f"appended to {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def crash() -> str:
    """Exit the server in the middle of the call (only the first time)."""
    await logged("crash")
    if not os.path.exists("crashed"):
        open("crashed", "w").close()
        os._exit(3)
    return "still here"


@server.tool()
async def crash_write() -> str:
    """Exit the server in the middle of the call (only the first time)."""
    await logged("crash_write")
    if not os.path.exists("crashed_write"):
        open("crashed_write", "w").close()
        os._exit(3)
    return "still here"


if __name__ == "__main__":
    with open("server.pids", "a") as f:
        f.write(f"{os.getpid()}\n")
    print("notes server: starting; secret-looking stderr line", file=sys.stderr, flush=True)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        # Streamable HTTP at http://127.0.0.1:PORT/mcp, with sessions and
        # SSE answers (the SDK's defaults).
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
