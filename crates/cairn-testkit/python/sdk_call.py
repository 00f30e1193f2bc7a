#!/usr/bin/env python3
"""One call through an official SDK; prints its parsed result as JSON.

    sdk_call.py --api {openai-chat,openai-responses,anthropic} --base-url URL
                [--stream] [--tools] [--model M] [--prompt TEXT] [--api-key K]
                [--max-retries N (default 0)] [--timeout S] [--header NAME:VALUE]...
                [--no-usage] [--n N] [--lax]

Exit 0: stdout is the result (see cairn_sdk.py). Exit 1: the SDK raised;
stdout is {"error": {"type", "message", "status"?, "body"?, "cause"?},
"events": events seen before, "provider_errors"?: the messages of the
provider's error events the SDK yielded instead of raising (Responses)}.
"""

import argparse
import sys

import cairn_sdk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cairn_sdk.add_call_arguments(parser)
    args = parser.parse_args()
    client = cairn_sdk.make_client(args)
    progress = cairn_sdk.Progress()
    try:
        result = cairn_sdk.call(args, client, args.stream, progress)
    except Exception as error:  # what the SDK raised is the answer
        failed = {"error": cairn_sdk.describe_error(error), "events": progress.events}
        if progress.provider_errors:
            failed["provider_errors"] = progress.provider_errors
        cairn_sdk.print_json(failed)
        return 1
    cairn_sdk.print_json(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
