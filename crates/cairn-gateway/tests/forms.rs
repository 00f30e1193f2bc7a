//! The response forms of DESIGN §7 on real-shaped samples, written for these
//! tests from the documented formats (ids, signatures and encrypted payloads
//! are made up): what the watcher reads from each stream and in any split,
//! where it holds the final event, and the conversions both ways.

use cairn_gateway::{
    parse_whole, stream_to_whole, whole_to_stream, Api, FormError, Parsed, StreamWatch,
};
use cairn_journal::Usage;
use proptest::prelude::*;
use serde_json::{json, Value};

const CHAT_TEXT: &str = concat!(
    "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüße, \"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"world 🌍\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\",\"created\":1760000000,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_1\",\"service_tier\":\"default\",\"choices\":[],\"usage\":{\"prompt_tokens\":21,\"completion_tokens\":5,\"total_tokens\":26,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
    "data: [DONE]\n\n",
);

const CHAT_TOOLS: &str = concat!(
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_r1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}],\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\": \\\"src/\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_w2\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"lib.rs\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"dir\\\": \\\".\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    ": keep-alive\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion.chunk\",\"created\":1760000001,\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":310,\"completion_tokens\":42,\"total_tokens\":352}}\r\n\r\n",
    "data: [DONE]\r\n\r\n",
);

const CHAT_REFUSAL: &str = concat!(
    "data: {\"id\":\"chatcmpl-C3\",\"object\":\"chat.completion.chunk\",\"created\":1760000002,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"refusal\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-C3\",\"object\":\"chat.completion.chunk\",\"created\":1760000002,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I can't help \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-C3\",\"object\":\"chat.completion.chunk\",\"created\":1760000002,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"with that.\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-C3\",\"object\":\"chat.completion.chunk\",\"created\":1760000002,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,\"total_tokens\":19}}\n\n",
    "data: [DONE]\n\n",
);

/// DeepSeek-style reasoning beside the answer; complete without `[DONE]`.
const CHAT_NO_DONE: &str = concat!(
    "data: {\"id\":\"d4\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"Think\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"d4\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"ing.\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"d4\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"42\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"d4\",\"object\":\"chat.completion.chunk\",\"created\":1760000003,\"model\":\"deepseek-reasoner\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":30,\"total_tokens\":39}}\n\n",
);

/// Ends after the finish reason, before the usage chunk: complete (the model
/// had finished), its usage unknown.
const CHAT_NO_USAGE: &str = concat!(
    "data: {\"id\":\"e5\",\"object\":\"chat.completion.chunk\",\"created\":1760000004,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"e5\",\"object\":\"chat.completion.chunk\",\"created\":1760000004,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
);

/// Cut inside the answer, before any finish reason.
const CHAT_CUT: &str = concat!(
    "data: {\"id\":\"e5\",\"object\":\"chat.completion.chunk\",\"created\":1760000004,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"e5\",\"obj",
);

const CHAT_ERROR: &str = concat!(
    "data: {\"id\":\"f6\",\"object\":\"chat.completion.chunk\",\"created\":1760000005,\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
    "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
    "data: [DONE]\n\n",
);

const RESPONSES_TEXT: &str = concat!(
    "event: response.created\n",
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1760000010,\"status\":\"in_progress\",\"model\":\"gpt-5-codex\",\"output\":[],\"parallel_tool_calls\":true,\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"},\"store\":false,\"tools\":[],\"usage\":null}}\n\n",
    "event: response.in_progress\n",
    "data: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1760000010,\"status\":\"in_progress\",\"model\":\"gpt-5-codex\",\"output\":[],\"usage\":null}}\n\n",
    "event: response.output_item.added\n",
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"gAAAA-made-up\"}}\n\n",
    "event: response.reasoning_summary_part.added\n",
    "data: {\"type\":\"response.reasoning_summary_part.added\",\"sequence_number\":3,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}}\n\n",
    "event: response.reasoning_summary_text.delta\n",
    "data: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":4,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"delta\":\"**Reading the file**\"}\n\n",
    "event: response.reasoning_summary_text.done\n",
    "data: {\"type\":\"response.reasoning_summary_text.done\",\"sequence_number\":5,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"text\":\"**Reading the file**\"}\n\n",
    "event: response.reasoning_summary_part.done\n",
    "data: {\"type\":\"response.reasoning_summary_part.done\",\"sequence_number\":6,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"**Reading the file**\"}}\n\n",
    "event: response.output_item.done\n",
    "data: {\"type\":\"response.output_item.done\",\"sequence_number\":7,\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"**Reading the file**\"}],\"encrypted_content\":\"gAAAA-made-up\"}}\n\n",
    "event: response.output_item.added\n",
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":8,\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n",
    "event: response.content_part.added\n",
    "data: {\"type\":\"response.content_part.added\",\"sequence_number\":9,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"\"}}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":10,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Done: \",\"logprobs\":[]}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":11,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"ça marche.\",\"logprobs\":[]}\n\n",
    "event: response.output_text.done\n",
    "data: {\"type\":\"response.output_text.done\",\"sequence_number\":12,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"text\":\"Done: ça marche.\",\"logprobs\":[]}\n\n",
    "event: response.content_part.done\n",
    "data: {\"type\":\"response.content_part.done\",\"sequence_number\":13,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Done: ça marche.\"}}\n\n",
    "event: response.output_item.done\n",
    "data: {\"type\":\"response.output_item.done\",\"sequence_number\":14,\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Done: ça marche.\"}],\"role\":\"assistant\"}}\n\n",
    "event: response.completed\n",
    "data: {\"type\":\"response.completed\",\"sequence_number\":15,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1760000010,\"status\":\"completed\",\"model\":\"gpt-5-codex\",\"output\":[{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"**Reading the file**\"}],\"encrypted_content\":\"gAAAA-made-up\"},{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Done: ça marche.\"}],\"role\":\"assistant\"}],\"parallel_tool_calls\":true,\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"},\"store\":false,\"tools\":[],\"usage\":{\"input_tokens\":1200,\"input_tokens_details\":{\"cached_tokens\":1024},\"output_tokens\":64,\"output_tokens_details\":{\"reasoning_tokens\":40},\"total_tokens\":1264}}}\n\n",
);

/// A function call; a proxy's `[DONE]` after the final event.
const RESPONSES_CALL: &str = concat!(
    "event: response.created\n",
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_2\",\"object\":\"response\",\"created_at\":1760000011,\"status\":\"in_progress\",\"model\":\"gpt-4.1\",\"output\":[],\"usage\":null}}\n\n",
    "event: response.output_item.added\n",
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":\"\",\"call_id\":\"call_s1\",\"name\":\"shell\"}}\n\n",
    "event: response.function_call_arguments.delta\n",
    "data: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":2,\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"{\\\"command\\\":[\\\"ls\\\",\"}\n\n",
    "event: response.function_call_arguments.delta\n",
    "data: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":3,\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"\\\"-la\\\"]}\"}\n\n",
    "event: response.function_call_arguments.done\n",
    "data: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":4,\"item_id\":\"fc_1\",\"output_index\":0,\"arguments\":\"{\\\"command\\\":[\\\"ls\\\",\\\"-la\\\"]}\"}\n\n",
    "event: response.output_item.done\n",
    "data: {\"type\":\"response.output_item.done\",\"sequence_number\":5,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"command\\\":[\\\"ls\\\",\\\"-la\\\"]}\",\"call_id\":\"call_s1\",\"name\":\"shell\"}}\n\n",
    "event: response.completed\n",
    "data: {\"type\":\"response.completed\",\"sequence_number\":6,\"response\":{\"id\":\"resp_2\",\"object\":\"response\",\"created_at\":1760000011,\"status\":\"completed\",\"model\":\"gpt-4.1\",\"output\":[{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"command\\\":[\\\"ls\\\",\\\"-la\\\"]}\",\"call_id\":\"call_s1\",\"name\":\"shell\"}],\"usage\":{\"input_tokens\":80,\"output_tokens\":19,\"total_tokens\":99}}}\n\n",
    "data: [DONE]\n\n",
);

const RESPONSES_INCOMPLETE: &str = concat!(
    "event: response.created\n",
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_3\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-4.1-mini\",\"output\":[],\"usage\":null}}\n\n",
    "event: response.output_item.added\n",
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_3\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n",
    "event: response.content_part.added\n",
    "data: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_3\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":\"\"}}\n\n",
    "event: response.output_text.delta\n",
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_3\",\"output_index\":0,\"content_index\":0,\"delta\":\"Once upon\"}\n\n",
    "event: response.incomplete\n",
    "data: {\"type\":\"response.incomplete\",\"sequence_number\":4,\"response\":{\"id\":\"resp_3\",\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"model\":\"gpt-4.1-mini\",\"output\":[{\"id\":\"msg_3\",\"type\":\"message\",\"status\":\"incomplete\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"text\":\"Once upon\"}],\"role\":\"assistant\"}],\"usage\":{\"input_tokens\":10,\"output_tokens\":2,\"total_tokens\":12}}}\n\n",
);

const RESPONSES_FAILED: &str = concat!(
    "event: response.created\n",
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_4\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-4.1\",\"output\":[],\"usage\":null}}\n\n",
    "event: response.failed\n",
    "data: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_4\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model failed to generate a response.\"},\"model\":\"gpt-4.1\",\"output\":[],\"usage\":null}}\n\n",
);

const MESSAGES_TOOL: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01A\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":2000,\"cache_read_input_tokens\":30000,\"cache_creation\":{\"ephemeral_5m_input_tokens\":2000,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":1,\"service_tier\":\"standard\"}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\n",
    "data: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I'll read \"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the file — ünïcode.\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01R\",\"name\":\"Read\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"file_path\\\": \\\"/src/ma\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"in.rs\\\", \\\"limit\\\": 40}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":2000,\"cache_read_input_tokens\":30000,\"output_tokens\":71}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

const MESSAGES_THINKING: &str = concat!(
    "event: message_start\r\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01B\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-4-1-20250805\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":500,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":4}}}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"The user wants \"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a haiku.\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM-made-up-signature==\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy-made-up-redacted\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\r\n\r\n",
    "event: content_block_start\r\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n",
    "event: content_block_delta\r\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"Old pond, a frog jumps.\"}}\r\n\r\n",
    "event: content_block_stop\r\n",
    "data: {\"type\":\"content_block_stop\",\"index\":2}\r\n\r\n",
    "event: message_delta\r\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":88}}\r\n\r\n",
    "event: message_stop\r\n",
    "data: {\"type\":\"message_stop\"}\r\n\r\n",
);

/// `max_tokens` inside a tool input; no `message_stop` (still complete).
const MESSAGES_CUT_TOOL: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01C\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":40,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01W\",\"name\":\"Write\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"file_path\\\": \\\"a.txt\\\", \\\"content\\\": \\\"line one\\\\nline t\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":16}}\n\n",
);

const MESSAGES_CUT_TEXT: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01D\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel",
);

const MESSAGES_OVERLOADED: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01E\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: error\n",
    "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
);

/// One sample and what the watcher must read from it.
struct Sample {
    name: &'static str,
    api: Api,
    bytes: &'static str,
    /// The text the final event's block begins with, if it has one.
    final_event: Option<&'static str>,
    usage: Option<(u64, u64)>,
    model: Option<&'static str>,
    complete: bool,
}

#[rustfmt::skip]
const SAMPLES: &[Sample] = &[
    Sample { name: "chat text", api: Api::ChatCompletions, bytes: CHAT_TEXT, final_event: Some("data: [DONE]"), usage: Some((21, 5)), model: Some("gpt-4.1-2025-04-14"), complete: true },
    Sample { name: "chat tools", api: Api::ChatCompletions, bytes: CHAT_TOOLS, final_event: Some("data: [DONE]"), usage: Some((310, 42)), model: Some("gpt-4.1"), complete: true },
    Sample { name: "chat refusal", api: Api::ChatCompletions, bytes: CHAT_REFUSAL, final_event: Some("data: [DONE]"), usage: Some((12, 7)), model: Some("gpt-4o"), complete: true },
    Sample { name: "chat without [DONE]", api: Api::ChatCompletions, bytes: CHAT_NO_DONE, final_event: None, usage: Some((9, 30)), model: Some("deepseek-reasoner"), complete: true },
    Sample { name: "chat without usage", api: Api::ChatCompletions, bytes: CHAT_NO_USAGE, final_event: None, usage: None, model: Some("gpt-4.1"), complete: true },
    Sample { name: "chat cut", api: Api::ChatCompletions, bytes: CHAT_CUT, final_event: None, usage: None, model: Some("gpt-4.1"), complete: false },
    Sample { name: "chat error", api: Api::ChatCompletions, bytes: CHAT_ERROR, final_event: Some("data: {\"error\""), usage: None, model: Some("gpt-4.1"), complete: false },
    Sample { name: "responses text", api: Api::Responses, bytes: RESPONSES_TEXT, final_event: Some("event: response.completed"), usage: Some((1200, 64)), model: Some("gpt-5-codex"), complete: true },
    Sample { name: "responses call", api: Api::Responses, bytes: RESPONSES_CALL, final_event: Some("event: response.completed"), usage: Some((80, 19)), model: Some("gpt-4.1"), complete: true },
    Sample { name: "responses incomplete", api: Api::Responses, bytes: RESPONSES_INCOMPLETE, final_event: Some("event: response.incomplete"), usage: Some((10, 2)), model: Some("gpt-4.1-mini"), complete: true },
    Sample { name: "responses failed", api: Api::Responses, bytes: RESPONSES_FAILED, final_event: Some("event: response.failed"), usage: None, model: Some("gpt-4.1"), complete: false },
    Sample { name: "messages tool", api: Api::Messages, bytes: MESSAGES_TOOL, final_event: Some("event: message_stop"), usage: Some((32012, 71)), model: Some("claude-sonnet-4-5-20250929"), complete: true },
    Sample { name: "messages thinking", api: Api::Messages, bytes: MESSAGES_THINKING, final_event: Some("event: message_stop"), usage: Some((500, 88)), model: Some("claude-opus-4-1-20250805"), complete: true },
    Sample { name: "messages cut tool", api: Api::Messages, bytes: MESSAGES_CUT_TOOL, final_event: None, usage: Some((40, 16)), model: Some("claude-haiku-4-5"), complete: true },
    Sample { name: "messages cut text", api: Api::Messages, bytes: MESSAGES_CUT_TEXT, final_event: None, usage: Some((7, 1)), model: Some("claude-sonnet-4-5"), complete: false },
    Sample { name: "messages overloaded", api: Api::Messages, bytes: MESSAGES_OVERLOADED, final_event: Some("event: error"), usage: Some((7, 1)), model: Some("claude-sonnet-4-5"), complete: false },
];

impl Sample {
    fn final_at(&self) -> Option<u64> {
        self.final_event.map(|f| {
            self.bytes
                .find(f)
                .expect("the sample holds its final event") as u64
        })
    }

    fn want(&self) -> Parsed {
        Parsed {
            usage: self.usage.map(|(input_tokens, output_tokens)| Usage {
                input_tokens,
                output_tokens,
            }),
            model: self.model.map(str::to_owned),
            complete: self.complete,
            choices: Vec::new(),
        }
    }
}

/// What a watcher ends with, fed `bytes` cut at `cuts`, checking the holding
/// rule after every feed.
fn watch(s: &Sample, cuts: &[usize]) -> (Parsed, Option<u64>, u64) {
    let bytes = s.bytes.as_bytes();
    let mut w = StreamWatch::new(s.api);
    let mut at = 0;
    let mut last = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(bytes.len());
    for end in ends {
        w.feed(&bytes[at..end]).unwrap();
        at = end;
        let f = w.forwardable();
        assert!(
            f >= last,
            "{}: forwardable went back from {last} to {f}",
            s.name
        );
        assert!(
            f <= w.fed(),
            "{}: forwardable {f} past the bytes fed",
            s.name
        );
        if let Some(final_at) = s.final_at() {
            assert!(
                f <= final_at,
                "{}: {f} passes the final event at {final_at}",
                s.name
            );
        }
        last = f;
    }
    w.finish();
    (w.parsed(), w.final_event_at(), w.forwardable())
}

#[test]
fn the_watcher_reads_each_sample() {
    for s in SAMPLES {
        let (parsed, final_at, forwardable) = watch(s, &[]);
        // How each answer ended is checked on its own (below).
        let parsed = Parsed {
            choices: Vec::new(),
            ..parsed
        };
        assert_eq!(parsed, s.want(), "{}", s.name);
        assert_eq!(final_at, s.final_at(), "{}", s.name);
        let all = s.bytes.len() as u64;
        assert_eq!(forwardable, s.final_at().unwrap_or(all), "{}", s.name);
    }
}

#[test]
fn whole_events_before_the_final_one_are_forwarded_at_once() {
    let s = &SAMPLES[0];
    let mut w = StreamWatch::new(s.api);
    let first_end = s.bytes.find("\n\n").unwrap() + 2;
    w.feed(&s.bytes.as_bytes()[..first_end - 1]).unwrap();
    assert_eq!(
        w.forwardable(),
        0,
        "an event without its blank line is held"
    );
    w.feed(b"\n").unwrap();
    assert_eq!(w.forwardable(), first_end as u64);
    let done = s.final_at().unwrap() as usize;
    w.feed(&s.bytes.as_bytes()[first_end..done + 3]).unwrap();
    assert_eq!(w.forwardable(), done as u64, "all but the start of [DONE]");
    w.feed(&s.bytes.as_bytes()[done + 3..]).unwrap();
    assert_eq!(w.forwardable(), done as u64, "[DONE] is held");
    assert!(w.complete());
}

proptest! {
    #[test]
    fn any_split_reads_the_same(
        which in 0..SAMPLES.len(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let s = &SAMPLES[which];
        prop_assert_eq!(watch(s, &cuts), watch(s, &[]));
    }
}

#[test]
fn byte_by_byte_reads_the_same() {
    for s in SAMPLES {
        let cuts: Vec<usize> = (0..s.bytes.len()).collect();
        assert_eq!(watch(s, &cuts), watch(s, &[]), "{}", s.name);
    }
}

fn whole(api: Api, sse: &str) -> Value {
    serde_json::from_slice(&stream_to_whole(api, sse.as_bytes()).unwrap()).unwrap()
}

#[test]
fn chat_streams_assemble_as_the_sdk_would_receive_them() {
    let w = whole(Api::ChatCompletions, CHAT_TEXT);
    assert_eq!(w["object"], "chat.completion");
    assert_eq!(w["id"], "chatcmpl-A1");
    assert_eq!(w["model"], "gpt-4.1-2025-04-14");
    assert_eq!(w["system_fingerprint"], "fp_1");
    assert_eq!(w["usage"]["prompt_tokens"], 21);
    assert_eq!(
        w["choices"],
        json!([{"index": 0, "logprobs": null, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Grüße, world 🌍", "refusal": null}}])
    );

    let w = whole(Api::ChatCompletions, CHAT_TOOLS);
    assert_eq!(
        w["choices"][0]["message"],
        json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
            {"id": "call_r1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}},
            {"id": "call_w2", "type": "function", "function": {"name": "list_dir", "arguments": "{\"dir\": \".\"}"}},
        ]})
    );
    assert_eq!(w["choices"][0]["finish_reason"], "tool_calls");

    let w = whole(Api::ChatCompletions, CHAT_REFUSAL);
    assert_eq!(
        w["choices"][0]["message"]["refusal"],
        "I can't help with that."
    );
    assert_eq!(w["choices"][0]["message"]["content"], Value::Null);

    let w = whole(Api::ChatCompletions, CHAT_NO_DONE);
    assert_eq!(w["choices"][0]["message"]["reasoning_content"], "Thinking.");
    assert_eq!(w["choices"][0]["message"]["content"], "42");
}

#[test]
fn responses_streams_assemble_to_the_final_response() {
    let w = whole(Api::Responses, RESPONSES_TEXT);
    let last = RESPONSES_TEXT.rsplit("data: ").next().unwrap();
    let last: Value = serde_json::from_str(last.trim()).unwrap();
    assert_eq!(w, last["response"]);
    let w = whole(Api::Responses, RESPONSES_CALL);
    assert_eq!(
        w["output"][0]["arguments"],
        "{\"command\":[\"ls\",\"-la\"]}"
    );
    let w = whole(Api::Responses, RESPONSES_INCOMPLETE);
    assert_eq!(w["status"], "incomplete");
}

#[test]
fn responses_output_comes_from_the_items_when_the_final_event_has_none() {
    let sse = RESPONSES_CALL.replace(
        "\"status\":\"completed\",\"model\":\"gpt-4.1\",\"output\":[{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"command\\\":[\\\"ls\\\",\\\"-la\\\"]}\",\"call_id\":\"call_s1\",\"name\":\"shell\"}]",
        "\"status\":\"completed\",\"model\":\"gpt-4.1\",\"output\":[]",
    );
    assert_ne!(sse, RESPONSES_CALL);
    assert_eq!(
        whole(Api::Responses, &sse),
        whole(Api::Responses, RESPONSES_CALL)
    );
}

#[test]
fn messages_streams_assemble_as_the_sdk_would_receive_them() {
    let w = whole(Api::Messages, MESSAGES_TOOL);
    assert_eq!(w["type"], "message");
    assert_eq!(w["stop_reason"], "tool_use");
    assert_eq!(w["usage"]["output_tokens"], 71);
    assert_eq!(w["usage"]["cache_read_input_tokens"], 30000);
    assert_eq!(w["usage"]["service_tier"], "standard");
    assert_eq!(
        w["content"],
        json!([
            {"type": "text", "text": "I'll read the file — ünïcode."},
            {"type": "tool_use", "id": "toolu_01R", "name": "Read", "input": {"file_path": "/src/main.rs", "limit": 40}},
        ])
    );

    let w = whole(Api::Messages, MESSAGES_THINKING);
    assert_eq!(
        w["content"],
        json!([
            {"type": "thinking", "thinking": "The user wants a haiku.", "signature": "EqQBCgIYAhIM-made-up-signature=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy-made-up-redacted"},
            {"type": "text", "text": "Old pond, a frog jumps."},
        ])
    );
    assert_eq!(
        w["usage"],
        json!({"input_tokens": 500, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 88})
    );

    let w = whole(Api::Messages, MESSAGES_CUT_TOOL);
    assert_eq!(w["stop_reason"], "max_tokens");
    assert_eq!(
        w["content"][0]["input"],
        json!({"file_path": "a.txt"}),
        "a string cut short is dropped, as the SDK's partial reader drops it"
    );
}

#[test]
fn a_stream_that_is_not_a_whole_response_has_no_whole_form() {
    type IsWant = fn(&FormError) -> bool;
    let rows: &[(Api, &str, IsWant)] = &[
        (Api::ChatCompletions, CHAT_CUT, |e| matches!(e, FormError::Incomplete { .. })),
        (Api::ChatCompletions, CHAT_ERROR, |e| matches!(e, FormError::UpstreamError { message, .. } if message.starts_with("The server had an error"))),
        (Api::Responses, RESPONSES_FAILED, |e| matches!(e, FormError::UpstreamError { message, .. } if message == "The model failed to generate a response. (server_error)")),
        (Api::Responses, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n", |e| matches!(e, FormError::Incomplete { .. })),
        (Api::Messages, MESSAGES_CUT_TEXT, |e| matches!(e, FormError::Incomplete { .. })),
        (Api::Messages, MESSAGES_OVERLOADED, |e| matches!(e, FormError::UpstreamError { message, .. } if message == "Overloaded (overloaded_error)")),
        (Api::ChatCompletions, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {oops\n\ndata: [DONE]\n\n", |e| matches!(e, FormError::BadEvent { offset: 67, .. })),
    ];
    for (api, sse, want) in rows {
        let err = stream_to_whole(*api, sse.as_bytes()).unwrap_err();
        assert!(want(&err), "{api}: {err}");
        assert!(err.to_string().contains(&api.to_string()), "{err}");
    }
}

#[test]
fn a_body_that_is_not_a_response_has_no_stream_form() {
    let rows: &[(Api, &str, bool)] = &[
        (Api::ChatCompletions, "<html>502</html>", true),
        (
            Api::ChatCompletions,
            r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#,
            false,
        ),
        (Api::ChatCompletions, "[]", false),
        (Api::Responses, r#"{"error":{"message":"bad"}}"#, false),
        (
            Api::Messages,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            false,
        ),
        (Api::Messages, "", true),
    ];
    for (api, body, not_json) in rows {
        let err = whole_to_stream(*api, body.as_bytes()).unwrap_err();
        match err {
            FormError::NotJson { .. } => assert!(not_json, "{api} {body}: {err}"),
            FormError::NotAResponse { .. } => assert!(!not_json, "{api} {body}: {err}"),
            other => panic!("{api} {body}: {other}"),
        }
    }
}

/// stream → whole → stream → whole is stable, and the second stream reads
/// like the first.
#[test]
fn conversions_round_trip() {
    for s in SAMPLES.iter().filter(|s| s.complete) {
        let w1 = stream_to_whole(s.api, s.bytes.as_bytes()).unwrap();
        let stream2 = whole_to_stream(s.api, &w1).unwrap();
        let w2 = stream_to_whole(s.api, &stream2).unwrap();
        let (v1, v2): (Value, Value) = (
            serde_json::from_slice(&w1).unwrap(),
            serde_json::from_slice(&w2).unwrap(),
        );
        assert_eq!(v1, v2, "{}", s.name);
        assert_eq!(w1, w2, "{}: the bytes too", s.name);
        assert_eq!(whole_to_stream(s.api, &w2).unwrap(), stream2, "{}", s.name);

        let mut watch2 = StreamWatch::new(s.api);
        watch2.feed(&stream2).unwrap();
        watch2.finish();
        let p = watch2.parsed();
        assert_eq!(
            (p.usage, p.model.as_deref(), p.complete),
            (s.want().usage, s.model, true),
            "{}",
            s.name
        );
        assert!(
            watch2.final_event_at().is_some(),
            "{}: a written stream has its final event",
            s.name
        );
        // How each answer ended reads the same from the stream, its whole
        // form and the stream written back.
        let ended = watch(s, &[]).0.choices;
        assert!(!ended.is_empty(), "{}", s.name);
        assert_eq!(p.choices, ended, "{}", s.name);
        let whole = parse_whole(s.api, &w1);
        assert_eq!(whole.choices, ended, "{}", s.name);
        let whole = Parsed {
            choices: Vec::new(),
            ..whole
        };
        assert_eq!(whole, s.want(), "{}", s.name);
    }
}

/// Whole bodies as the APIs return them come back unchanged through a stream.
#[test]
fn whole_bodies_survive_a_stream() {
    let rows: Vec<(Api, Value)> = vec![
        (
            Api::ChatCompletions,
            json!({
                "id": "chatcmpl-W1", "object": "chat.completion", "created": 1760000100, "model": "gpt-4.1",
                "system_fingerprint": null, "service_tier": "default",
                "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": "Let me look.", "refusal": null, "annotations": [],
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\":\"x\"}"}}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62,
                    "prompt_tokens_details": {"cached_tokens": 0}}
            }),
        ),
        (
            Api::ChatCompletions,
            json!({
                "id": "chatcmpl-W2", "object": "chat.completion", "created": 1760000101, "model": "gpt-4o",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "logprobs": {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}], "refusal": null},
                     "message": {"role": "assistant", "content": "Hi", "refusal": null}},
                    {"index": 1, "finish_reason": "length", "logprobs": null,
                     "message": {"role": "assistant", "content": "", "refusal": null}}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
            }),
        ),
        (
            Api::Responses,
            json!({
                "id": "resp_W", "object": "response", "created_at": 1760000102, "status": "completed", "model": "gpt-5",
                "output": [
                    {"id": "rs_W", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan"}]},
                    {"id": "ws_W", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "rust"}},
                    {"id": "msg_W", "type": "message", "status": "completed", "role": "assistant",
                     "content": [{"type": "output_text", "text": "See [1].", "annotations": [{"type": "url_citation", "url": "https://example.invalid", "start_index": 4, "end_index": 7, "title": "x"}]},
                                 {"type": "refusal", "refusal": "Not that part."}]},
                    {"id": "fc_W", "type": "function_call", "status": "completed", "call_id": "call_W", "name": "f", "arguments": "{}"}
                ],
                "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
            }),
        ),
        (
            Api::Messages,
            json!({
                "id": "msg_W", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "thinking", "thinking": "Hmm.", "signature": "sig=="},
                    {"type": "text", "text": "Cited.", "citations": [{"type": "char_location", "cited_text": "a", "document_index": 0, "document_title": null, "start_char_index": 0, "end_char_index": 1}]},
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
                    {"type": "text", "text": ""}
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 20,
                          "server_tool_use": {"web_search_requests": 1}}
            }),
        ),
    ];
    for (api, w) in rows {
        let stream = whole_to_stream(api, w.to_string().as_bytes()).unwrap();
        let back: Value = serde_json::from_slice(&stream_to_whole(api, &stream).unwrap()).unwrap();
        assert_eq!(back, w, "{api}: {}", String::from_utf8_lossy(&stream));
        let mut watch = StreamWatch::new(api);
        watch.feed(&stream).unwrap();
        watch.finish();
        assert_eq!(
            watch.parsed(),
            parse_whole(api, w.to_string().as_bytes()),
            "{api}"
        );
    }
}

#[test]
fn parse_whole_reads_usage_and_model() {
    type Row = (
        Api,
        &'static str,
        Option<(u64, u64)>,
        Option<&'static str>,
        bool,
    );
    let rows: &[Row] = &[
        (
            Api::ChatCompletions,
            r#"{"object":"chat.completion","model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            Some((3, 4)),
            Some("gpt-4.1"),
            true,
        ),
        (
            Api::ChatCompletions,
            r#"{"error":{"message":"x"}}"#,
            None,
            None,
            false,
        ),
        (
            Api::Responses,
            r#"{"object":"response","status":"completed","model":"gpt-5","usage":{"input_tokens":5,"output_tokens":6}}"#,
            Some((5, 6)),
            Some("gpt-5"),
            true,
        ),
        (
            Api::Responses,
            r#"{"object":"response","status":"in_progress","model":"gpt-5","usage":null}"#,
            None,
            Some("gpt-5"),
            false,
        ),
        (
            Api::Messages,
            r#"{"type":"message","model":"claude","stop_reason":"end_turn","usage":{"input_tokens":1,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":4}}"#,
            Some((6, 4)),
            Some("claude"),
            true,
        ),
        (
            Api::Messages,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
            None,
            false,
        ),
        (Api::Messages, "not json", None, None, false),
    ];
    for (api, body, usage, model, complete) in rows {
        let want = Parsed {
            usage: usage.map(|(i, o)| Usage {
                input_tokens: i,
                output_tokens: o,
            }),
            model: model.map(str::to_owned),
            complete: *complete,
            choices: Vec::new(),
        };
        let got = Parsed {
            choices: Vec::new(),
            ..parse_whole(*api, body.as_bytes())
        };
        assert_eq!(got, want, "{api} {body}");
    }
}

#[test]
fn recorded_routes() {
    let rows = [
        ("/v1/chat/completions", Some(Api::ChatCompletions)),
        ("/v1/responses", Some(Api::Responses)),
        ("/v1/messages", Some(Api::Messages)),
        ("/v1/messages?beta=true", Some(Api::Messages)),
        ("/v1/messages/count_tokens", None),
        ("/v1/models", None),
        ("/v1/responses/resp_1", None),
        ("/v1/chat/completions/", None),
        ("/chat/completions", None),
        ("/", None),
    ];
    for (path, want) in rows {
        assert_eq!(Api::of_path(path), want, "{path}");
        if let Some(api) = want {
            assert!(path.starts_with(api.path()));
        }
    }
}
