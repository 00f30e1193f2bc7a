//! A provider's error inside a 200 response, through the gateway (DESIGN
//! §7): the client gets every byte and a body that ends properly, the
//! `model_call` says the provider's status and message, and the call is
//! never kept to be served again.

mod rig;

use cairn_testkit::upstream::fixtures::{Api, PROVIDER_ERRORS};
use cairn_testkit::upstream::Script;
use rig::Rig;
use serde_json::{json, Value};

/// A request of `api`, streamed or not.
fn request(api: Api, stream: bool) -> Value {
    match api {
        Api::OpenAiChat => json!({
            "model": "gpt-4o-mini", "stream": stream,
            "messages": [{"role": "user", "content": "Say hello."}]
        }),
        Api::OpenAiResponses => {
            json!({"model": "gpt-4o-mini", "stream": stream, "input": "Say hello."})
        }
        Api::Anthropic => json!({
            "model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream,
            "messages": [{"role": "user", "content": "Say hello."}]
        }),
    }
}

async fn post(
    rig: &Rig,
    api: Api,
    body: &Value,
    retry: bool,
) -> (
    u16,
    reqwest::header::HeaderMap,
    Result<Vec<u8>, reqwest::Error>,
) {
    let mut req = reqwest::Client::new()
        .post(format!("{}{}", rig.base, api.path()))
        .json(body);
    req = match api {
        Api::Anthropic => req
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01"),
        _ => req.header("authorization", "Bearer sk-test"),
    };
    if retry {
        req = req.header("x-stainless-retry-count", "1");
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.map(|b| b.to_vec()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_error_in_a_200_reaches_the_client_whole_is_journaled_and_never_replayed() {
    for f in PROVIDER_ERRORS {
        let mut rig = Rig::start(Script::always(f.reply())).await;
        let body = request(f.api, f.stream);
        let (status, _, got) = post(&rig, f.api, &body, false).await;
        assert_eq!(status, 200, "{}", f.name);
        let got = got.unwrap_or_else(|e| panic!("{}: the body did not end properly: {e}", f.name));
        assert_eq!(
            got, f.body,
            "{}: every byte, as the provider sent it",
            f.name
        );

        let calls = rig.calls();
        assert_eq!(calls.len(), 1, "{}", f.name);
        let c = &calls[0];
        assert_eq!(c.status, 200, "{}: the provider's status", f.name);
        let error = c.error.as_deref().unwrap_or_default();
        assert!(
            error.contains(f.message),
            "{}: the provider's message is on the record: {error:?}",
            f.name
        );
        assert!(
            !error.contains("ended before it was complete"),
            "{}: {error}",
            f.name
        );
        assert!(c.response.is_some(), "{}: its bytes are kept", f.name);
        assert_eq!(
            c.delivered,
            cairn_journal::Delivered::Complete,
            "{}",
            f.name
        );
        assert!(
            rig.responses().get(&c.key).unwrap().is_none(),
            "{}: a failed call is not a response to serve",
            f.name
        );

        // A retry, marked so or not, and under either form, goes upstream.
        for (retry, stream) in [(true, f.stream), (false, f.stream), (true, !f.stream)] {
            let (_, headers, _) = post(&rig, f.api, &request(f.api, stream), retry).await;
            assert!(headers.get("cairn-replay").is_none(), "{}", f.name);
        }
        assert_eq!(rig.upstream.count(), 4, "{}: bought each time", f.name);
        rig.stop().await;
    }
}
