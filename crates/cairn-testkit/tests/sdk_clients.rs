//! The mock upstream answers each official SDK correctly: the SDKs (with
//! strict response validation) parse its answers, streamed and not, to what
//! the script said.

mod common;

use cairn_testkit::upstream::{Reply, Script, Upstream, Usage};
use common::{base_for, ok_json, route, sdk_call, APIS};
use serde_json::json;

#[test]
fn each_sdk_parses_a_text_answer_streamed_and_not() {
    let reply = Reply::text("Hello from the mock, ünïcödé and all.").with_full_usage(Usage {
        input_tokens: 31,
        output_tokens: 9,
        cached_input_tokens: 4,
    });
    for api in APIS {
        for stream in [false, true] {
            let upstream = Upstream::start(Script::always(reply.clone()));
            let base = base_for(api, &upstream.base_url());
            let args: &[&str] = if stream { &["--stream"] } else { &[] };
            let got = ok_json(&sdk_call(api, &base, args));
            let what = format!("{api} stream={stream}");
            assert_eq!(
                got["text"], "Hello from the mock, ünïcödé and all.",
                "{what}"
            );
            assert_eq!(got["tool_calls"], json!([]), "{what}");
            assert_eq!(
                got["usage"],
                json!({"input_tokens": 31, "output_tokens": 9, "cached_input_tokens": 4}),
                "{what}"
            );
            let stop = match api {
                "openai-chat" => "stop",
                "openai-responses" => "completed",
                _ => "end_turn",
            };
            assert_eq!(got["stop"], stop, "{what}");
            let requests = upstream.requests();
            assert_eq!(requests.len(), 1, "{what}");
            assert_eq!(requests[0].path, route(api), "{what}");
            assert_eq!(requests[0].is_stream(), stream, "{what}");
            assert_eq!(
                got["model"].as_str(),
                requests[0].model().as_deref(),
                "{what}"
            );
        }
    }
}
