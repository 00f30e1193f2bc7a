#!/usr/bin/env python3
"""A call with retries on, as an application makes it; prints every attempt.

    retry_call.py (the arguments of sdk_call.py) [--max-retries N (default 2)]
                  [--app-retries M (default 1)] [--retry-without-stream]

The SDK's own retries (--max-retries) cover a failure before the response
headers arrive and a cut whole body: the SDK re-sends the request itself,
with x-stainless-retry-count 1, 2, …. A stream cut after its headers is not
retried by openai 3.57 or anthropic 2.15: the error comes out of the
iteration, after the SDK's retry loop. So, as agents do, this script then
calls again itself (--app-retries; that is a fresh SDK call, whose
x-stainless-retry-count starts at 0 again), streamed again or, with
--retry-without-stream, not streamed (what Claude Code does after a cut).

Exit 0 when an attempt succeeded, 1 when all failed. stdout:
    {"attempts": [{"ok", "stream", "events", "error"?}, …],
     "result": <the successful attempt's result, or null>}
"""

import argparse
import sys

import cairn_sdk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cairn_sdk.add_call_arguments(parser)
    parser.set_defaults(max_retries=2)
    parser.add_argument("--app-retries", type=int, default=1,
                        help="calls made again by this script after an SDK call failed")
    parser.add_argument("--retry-without-stream", action="store_true",
                        help="make the script's own retries without streaming")
    args = parser.parse_args()
    client = cairn_sdk.make_client(args)
    attempts = []
    for attempt in range(args.app_retries + 1):
        stream = args.stream and not (attempt > 0 and args.retry_without_stream)
        progress = cairn_sdk.Progress()
        try:
            result = cairn_sdk.call(args, client, stream, progress)
        except Exception as error:  # an application would log it and retry
            attempts.append({"ok": False, "stream": stream, "events": progress.events,
                             "error": cairn_sdk.describe_error(error)})
            continue
        attempts.append({"ok": True, "stream": stream, "events": result["events"]})
        cairn_sdk.print_json({"attempts": attempts, "result": result})
        return 0
    cairn_sdk.print_json({"attempts": attempts, "result": None})
    return 1


if __name__ == "__main__":
    sys.exit(main())
