#!/usr/bin/env python3
"""A small agent on the openai SDK: Chat Completions with one tool,
write_file, which it carries out by writing files in its working directory.

    agent.py [--task TEXT] [--model M] [--max-turns N (default 8)] [--stream]
             [--pause-after-tools SECONDS] [--max-retries N (default 2)]

It reads OPENAI_BASE_URL and OPENAI_API_KEY (default sk-cairn-test), as
`cairn exec --gateway -- python agent.py` sets them. Each turn it sends the
whole conversation, and everything it sends depends only on the task and on
the model's answers (the tool results say what was written, not when), so a
run killed at any point and started again sends the same requests in the
same order: what a gateway needs to serve the re-run from its store. Writing
a file again with the same content is harmless, so the re-run redoes its
work without changing the outcome.

stdout, one JSON document a line, flushed as it happens:
    {"event": "turn", "turn": i, "wrote": [paths]}   after turn i's tools ran
    {"event": "done", "turn": i, "text": final text} the model stopped calling
Exit 0 when done; 1 on an SDK error ({"event": "error", …}); 3 when
--max-turns ran out.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import openai

SYSTEM = "You are a coding agent. Use write_file to create the files the task asks for."
WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a UTF-8 text file, relative to the working directory.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def emit(document) -> None:
    sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    sys.stdout.flush()


def write_file(path: str, content: str) -> str:
    """Writes `content` to `path` under the working directory, atomically
    (temp file, fsync, rename); returns the tool's answer. A path that is
    absolute or has an empty, "." or ".." part raises ValueError."""
    parts = path.split("/")
    if os.path.isabs(path) or not path or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{path!r} is not a plain relative path")
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    data = content.encode("utf-8")
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".agent-tmp-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return f"wrote {len(data)} bytes to {path}"


def complete(client, args, messages):
    kwargs = {"model": args.model, "messages": messages, "tools": [WRITE_FILE]}
    if args.stream:
        with client.chat.completions.stream(**kwargs) as events:
            for _event in events:
                pass
            return events.get_final_completion()
    return client.chat.completions.create(**kwargs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Create hello.txt saying hello, then notes/todo.txt.")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--pause-after-tools", type=float, default=0.0,
                        help="seconds to wait after each turn's tools ran (room for a kill)")
    parser.add_argument("--max-retries", type=int, default=2)
    args = parser.parse_args()

    client = openai.OpenAI(
        api_key=os.environ.get("OPENAI_API_KEY") or "sk-cairn-test",
        base_url=os.environ.get("OPENAI_BASE_URL"),
        max_retries=args.max_retries,
    )
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": args.task}]
    for turn in range(args.max_turns):
        try:
            completion = complete(client, args, messages)
        except openai.OpenAIError as error:
            emit({"event": "error", "turn": turn, "type": type(error).__name__,
                  "message": str(error)})
            return 1
        message = completion.choices[0].message
        calls = message.tool_calls or []
        if not calls:
            emit({"event": "done", "turn": turn, "text": message.content or ""})
            return 0
        messages.append({
            "role": "assistant",
            "content": message.content,
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.function.name,
                                         "arguments": c.function.arguments}}
                           for c in calls],
        })
        wrote = []
        for c in calls:
            if c.function.name != "write_file":
                answer = f"unknown tool {c.function.name!r}"
            else:
                try:
                    arguments = json.loads(c.function.arguments)
                    answer = write_file(arguments["path"], arguments["content"])
                    wrote.append(arguments["path"])
                except (ValueError, KeyError, TypeError) as error:
                    answer = f"bad arguments: {error}"
            messages.append({"role": "tool", "tool_call_id": c.id, "content": answer})
        emit({"event": "turn", "turn": turn, "wrote": wrote})
        if args.pause_after_tools > 0:
            time.sleep(args.pause_after_tools)
    emit({"event": "error", "turn": args.max_turns, "type": "TooManyTurns",
          "message": f"no answer after {args.max_turns} turns"})
    return 3


if __name__ == "__main__":
    sys.exit(main())
