"""One model call through an official SDK, its parsed result as plain JSON.

Shared by sdk_call.py and retry_call.py. The SDKs are used unmodified, the
way an application uses them: streams go through the SDKs' own stream
helpers (chat.completions.stream, responses.stream, messages.stream), which
check the event sequence and assemble the final object, and responses are
validated against the SDKs' models (_strict_response_validation) unless
--lax is given.

The result (what a test compares between a direct call and one through the
gateway):
    {"api", "stream", "id", "model", "text",
     "tool_calls": [{"id", "name", "arguments": <parsed JSON>}],
     "stop": finish_reason | stop_reason | status,
     "usage": {"input_tokens", "output_tokens", "cached_input_tokens"},
     "events": raw events the SDK yielded (streams; pings and [DONE] are
               not yielded by the SDKs), null when not streamed}
"""

import argparse
import json
import sys

APIS = ("openai-chat", "openai-responses", "anthropic")
# Routes the gateway passes through unrecorded: their results are
# {"models": [ids]} and {"input_tokens": n}.
PASSTHROUGH = ("openai-models", "anthropic-models", "anthropic-count-tokens")

DEFAULT_MODELS = {
    "openai-chat": "gpt-4o-mini",
    "openai-responses": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "anthropic-count-tokens": "claude-sonnet-4-5",
}

# The one tool the scripts offer, strict so the SDKs' stream helpers accept
# it (they parse only strict function tools).
WRITE_FILE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
WRITE_FILE_DESCRIPTION = "Write a UTF-8 text file, relative to the working directory."


def add_call_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", choices=APIS + PASSTHROUGH, required=True)
    parser.add_argument("--base-url", required=True,
                        help="OpenAI: with /v1 (http://127.0.0.1:PORT/v1); Anthropic: without")
    parser.add_argument("--api-key", default="sk-cairn-test")
    parser.add_argument("--model", default=None, help="default: one per API")
    parser.add_argument("--prompt", default="Say hello.")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--tools", action="store_true", help="offer the write_file tool")
    parser.add_argument("--no-usage", action="store_true",
                        help="chat streams: do not ask for the usage chunk")
    parser.add_argument("--n", type=int, default=None,
                        help="chat: ask for N choices (the result is choice 0's)")
    parser.add_argument("--max-retries", type=int, default=0, help="the SDK's own retries")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds")
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                        help="an extra request header (repeatable)")
    parser.add_argument("--lax", action="store_true",
                        help="do not validate responses against the SDK's models")


def make_client(args):
    strict = not args.lax
    if args.api.startswith("anthropic"):
        import anthropic

        return anthropic.Anthropic(api_key=args.api_key, base_url=args.base_url,
                                   max_retries=args.max_retries, timeout=args.timeout,
                                   _strict_response_validation=strict)
    import openai

    return openai.OpenAI(api_key=args.api_key, base_url=args.base_url,
                         max_retries=args.max_retries, timeout=args.timeout,
                         _strict_response_validation=strict)


def extra_headers(args) -> dict:
    headers = {}
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep:
            raise SystemExit(f"--header {item!r}: give NAME:VALUE")
        headers[name.strip()] = value.strip()
    return headers


class Progress:
    """What a call got before it ended or failed."""

    def __init__(self):
        self.events = 0
        # The provider's own error messages a stream carried as events
        # (Responses' `error` and `response.failed`), which the SDK yields
        # rather than raises.
        self.provider_errors = []


def call(args, client, stream: bool, progress: Progress) -> dict:
    """Makes the call; raises what the SDK raises."""
    model = args.model or DEFAULT_MODELS.get(args.api)
    headers = extra_headers(args)
    if args.api == "openai-chat":
        return _chat(args, client, model, stream, headers, progress)
    if args.api == "openai-responses":
        return _responses(args, client, model, stream, headers, progress)
    if args.api == "anthropic":
        return _messages(args, client, model, stream, headers, progress)
    if args.api == "anthropic-count-tokens":
        counted = client.messages.count_tokens(
            model=model, messages=[{"role": "user", "content": args.prompt}],
            extra_headers=headers)
        return {"input_tokens": counted.input_tokens}
    return {"models": [m.id for m in client.models.list(extra_headers=headers)]}


def _result(args, stream, id, model, text, tool_calls, stop, usage, progress):
    return {
        "api": args.api, "stream": stream, "id": id, "model": model, "text": text,
        "tool_calls": tool_calls, "stop": stop, "usage": usage,
        "events": progress.events if stream else None,
    }


def _chat(args, client, model, stream, headers, progress):
    kwargs = {
        "model": model,
        "messages": [{"role": "user", "content": args.prompt}],
        "extra_headers": headers,
    }
    if args.n is not None:
        kwargs["n"] = args.n
    if args.tools:
        kwargs["tools"] = [{"type": "function", "function": {
            "name": "write_file", "description": WRITE_FILE_DESCRIPTION,
            "parameters": WRITE_FILE_SCHEMA, "strict": True}}]
    if stream:
        if not args.no_usage:
            kwargs["stream_options"] = {"include_usage": True}
        with client.chat.completions.stream(**kwargs) as events:
            for event in events:
                if event.type == "chunk":
                    progress.events += 1
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(**kwargs)
    choice = completion.choices[0]
    calls = [{"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)}
             for c in (choice.message.tool_calls or [])]
    usage = None
    if completion.usage is not None:
        details = completion.usage.prompt_tokens_details
        usage = {"input_tokens": completion.usage.prompt_tokens,
                 "output_tokens": completion.usage.completion_tokens,
                 "cached_input_tokens": (details.cached_tokens or 0) if details else 0}
    return _result(args, stream, completion.id, completion.model, choice.message.content or "",
                   calls, choice.finish_reason, usage, progress)


def _responses(args, client, model, stream, headers, progress):
    kwargs = {"model": model, "input": args.prompt, "extra_headers": headers}
    if args.tools:
        kwargs["tools"] = [{"type": "function", "name": "write_file",
                            "description": WRITE_FILE_DESCRIPTION,
                            "parameters": WRITE_FILE_SCHEMA, "strict": True}]
    if stream:
        with client.responses.stream(**kwargs) as events:
            for event in events:
                progress.events += 1
                if event.type == "error":
                    progress.provider_errors.append(event.message)
                elif event.type == "response.failed" and event.response.error is not None:
                    progress.provider_errors.append(event.response.error.message)
            response = events.get_final_response()
    else:
        response = client.responses.create(**kwargs)
    calls = [{"id": item.call_id, "name": item.name, "arguments": json.loads(item.arguments)}
             for item in response.output if item.type == "function_call"]
    usage = None
    if response.usage is not None:
        usage = {"input_tokens": response.usage.input_tokens,
                 "output_tokens": response.usage.output_tokens,
                 "cached_input_tokens": response.usage.input_tokens_details.cached_tokens}
    return _result(args, stream, response.id, response.model, response.output_text, calls,
                   response.status, usage, progress)


# The Messages events the SDK yields as they came (it also yields events of
# its own making, such as "text", which are not counted).
_ANTHROPIC_RAW = {"message_start", "message_delta", "message_stop", "content_block_start",
                  "content_block_delta", "content_block_stop"}


def _messages(args, client, model, stream, headers, progress):
    kwargs = {
        "model": model,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": args.prompt}],
        "extra_headers": headers,
    }
    if args.tools:
        kwargs["tools"] = [{"name": "write_file", "description": WRITE_FILE_DESCRIPTION,
                            "input_schema": WRITE_FILE_SCHEMA}]
    if stream:
        with client.messages.stream(**kwargs) as events:
            for event in events:
                if event.type in _ANTHROPIC_RAW:
                    progress.events += 1
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = [{"id": block.id, "name": block.name, "arguments": block.input}
             for block in message.content if block.type == "tool_use"]
    u = message.usage
    cached = u.cache_read_input_tokens or 0
    usage = {"input_tokens": u.input_tokens + cached + (u.cache_creation_input_tokens or 0),
             "output_tokens": u.output_tokens, "cached_input_tokens": cached}
    return _result(args, stream, message.id, message.model, text, calls, message.stop_reason,
                   usage, progress)


def describe_error(error: BaseException) -> dict:
    """An exception as JSON: its class, message, HTTP status and body if any."""
    described = {"type": type(error).__name__, "message": str(error)}
    status = getattr(error, "status_code", None)
    if status is not None:
        described["status"] = status
        described["body"] = getattr(error, "body", None)
    cause = error.__cause__ or error.__context__
    if cause is not None:
        described["cause"] = f"{type(cause).__name__}: {cause}"
    return described


def print_json(document) -> None:
    sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    sys.stdout.flush()
