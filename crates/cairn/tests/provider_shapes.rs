//! What real providers send, through `cairn run` and the real HTTP path
//! (the testkit's mock upstream playing recorded responses byte for byte;
//! the fixtures are cairn-model's, `crates/cairn-model/tests/fixtures/`,
//! where each one's origin is noted): a tool call cut by the output limit is
//! a whole answer, journaled and never run nor bought twice; usage is read
//! where providers put it and an unreported one is priced unknown; a
//! refusal's stop details are kept verbatim; several choices are refused.

mod common;

use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!("../../cairn-model/tests/fixtures/", $path)).to_vec()
    };
}

/// `cairn run --json` against `upstream` with `model` (`openai:…` or
/// `anthropic:…`), prices from `prices` when given.
fn run(
    s: &Scratch,
    upstream: &Upstream,
    model: &str,
    prices: Option<Value>,
) -> std::process::Output {
    let base = if model.starts_with("anthropic:") {
        upstream.base_url()
    } else {
        upstream.openai_base_url()
    };
    let mut cmd = s.cmd();
    if let Some(prices) = prices {
        let path = s.dir.path().join("prices.json");
        std::fs::write(&path, prices.to_string()).unwrap();
        cmd.env("CAIRN_PRICES", path);
    }
    cmd.env("OPENAI_API_KEY", "sk-test")
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CAIRN_RETRY_BASE_MS", "1")
        .args(["run", "--model", model, "--base-url", &base, "--json"])
        .arg("write the report")
        .output()
        .unwrap()
}

fn assistants(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "assistant")
        .collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The model's cut call: journaled as received, never run, the model told;
/// the next turn asked for once; the run goes on to its answer.
fn assert_cut_call_kept_not_run(
    s: &Scratch,
    upstream: &Upstream,
    out: &std::process::Output,
    call: &str,
    arguments: &str,
    stop_reason: &str,
) -> Vec<Value> {
    assert!(out.status.success(), "{}", stderr(out));
    assert_eq!(json(&out.stdout)["status"], "completed");
    assert_eq!(
        upstream.count(),
        2,
        "one request per turn: the cut answer was not bought again"
    );
    let recs = s.records(&s.only_session());
    let turn = assistants(&recs)[0].clone();
    assert_eq!(turn["stop_reason"], stop_reason);
    assert_eq!(turn["tool_calls"][0]["id"], call);
    assert_eq!(turn["tool_calls"][0]["arguments"], json!(arguments));
    assert!(
        !recs.iter().any(|r| r["kind"] == "tool_start"),
        "the cut call was not dispatched"
    );
    let result = results_for(&recs, call);
    assert_eq!(result.len(), 1);
    assert_eq!(result[0]["outcome"], "error");
    assert!(!s.ws.join("report.md").exists() && !s.ws.join("notes.txt").exists());
    // The model is shown that its call was not run.
    let sent: Value = serde_json::from_slice(&upstream.requests()[1].body).unwrap();
    assert!(sent.to_string().contains("NOT run"), "{sent}");
    recs
}

#[test]
fn an_anthropic_tool_call_cut_by_max_tokens_without_its_block_stop_is_bought_once() {
    let cut = r##"{"path": "report.md", "content": "# Q3 report\n\nRevenue gr"##;
    for fixture in [
        fixture!("anthropic/max_tokens_in_open_tool_use.sse"),
        fixture!("anthropic/max_tokens_in_open_tool_use_no_stop.sse"),
    ] {
        let upstream = Upstream::start(Script::by_turn(vec![
            Reply::raw_stream(fixture),
            Reply::raw_stream(fixture!("anthropic/no_trailing_blank_line.sse")),
        ]));
        let s = Scratch::new();
        let out = run(&s, &upstream, "anthropic:claude-sonnet-4-5", None);
        let recs = assert_cut_call_kept_not_run(
            &s,
            &upstream,
            &out,
            "toolu_01Rk7Tq2WmZ9",
            cut,
            "max_tokens",
        );
        let turn = assistants(&recs)[0];
        assert_eq!(turn["text"], "I'll write the report to a file.");
        assert_eq!(
            turn["usage"],
            json!({"input_tokens": 412, "output_tokens": 64})
        );
    }
}

#[test]
fn an_openai_tool_call_cut_by_length_without_a_usage_chunk_is_bought_once_and_priced_unknown() {
    let cut = r#"{"path": "notes.txt", "content": "alpha\nbe"#;
    for fixture in [
        fixture!("openai/length_in_tool_call_no_usage.sse"),
        fixture!("openai/length_in_tool_call_eof.sse"),
    ] {
        let upstream = Upstream::start(Script::by_turn(vec![
            Reply::raw_stream(fixture),
            Reply::raw_stream(fixture!("openai/text.sse")),
        ]));
        let s = Scratch::new();
        // The model that answered has a price: a call without usage must
        // not come out as a free one.
        let prices = json!({"openai:gpt-oss-20b": {"input_per_mtok": 0.1, "output_per_mtok": 0.5}});
        let out = run(&s, &upstream, "openai:gpt-oss-20b", Some(prices));
        let recs =
            assert_cut_call_kept_not_run(&s, &upstream, &out, "call_M3pQ7vXa", cut, "length");
        let turn = assistants(&recs)[0];
        assert_eq!(turn["cost"], json!({"state": "unknown", "usd": null}));
        let last = recs.last().unwrap();
        assert_eq!(last["totals"]["cost"]["state"], "unknown", "{last}");
    }
}

#[test]
fn usage_is_read_where_groq_and_moonshot_put_it() {
    let rows = [
        (
            fixture!("openai/groq_usage_in_x_groq.sse"),
            "openai:moonshotai/kimi-k2-instruct-0905",
            (20, 3),
        ),
        (
            fixture!("openai/moonshot_usage_in_choice.sse"),
            "openai:kimi-k2-turbo-preview",
            (19, 13),
        ),
    ];
    for (fixture, model, (input, output)) in rows {
        let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture)));
        let s = Scratch::new();
        let prices = json!({ model: {"input_per_mtok": 1.0, "output_per_mtok": 2.0} });
        let out = run(&s, &upstream, model, Some(prices));
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let recs = s.records(&s.only_session());
        let turn = assistants(&recs)[0];
        assert_eq!(
            turn["usage"],
            json!({"input_tokens": input, "output_tokens": output}),
            "{model}"
        );
        let usd = turn["cost"]["usd"].as_f64().unwrap();
        let want = (input as f64 * 1.0 + output as f64 * 2.0) / 1e6;
        assert!((usd - want).abs() < 1e-12, "{model}: {usd}");
        assert_eq!(upstream.count(), 1);
    }
}

#[test]
fn an_anthropic_refusals_stop_details_are_journaled_verbatim() {
    let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture!(
        "anthropic/refusal_stop_details.sse"
    ))));
    let s = Scratch::new();
    let out = run(&s, &upstream, "anthropic:claude-opus-4-5", None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refusal does not complete the task"
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let turn = assistants(&recs)[0];
    let explanation = "This request was declined because it asks for working malware.";
    assert_eq!(
        turn["stop_details"],
        json!({"type": "refusal", "category": "cyber", "explanation": explanation})
    );
    assert_eq!(
        turn["refusal"], explanation,
        "the provider's words, not cairn's"
    );
    let last = recs.last().unwrap();
    assert_eq!(last["reason"], "failed");
    assert!(
        last["detail"].as_str().unwrap().contains(explanation),
        "{last}"
    );
    assert_eq!(upstream.count(), 1);
}

#[test]
fn a_response_with_several_choices_is_refused_with_a_clear_error_and_not_bought_again() {
    let upstream = Upstream::start(Script::always(Reply::raw_stream(fixture!(
        "openai/n_choices.sse"
    ))));
    let s = Scratch::new();
    let out = run(&s, &upstream, "openai:gpt-4.1-mini", None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(upstream.count(), 1, "not bought again");
    let recs = s.records(&s.only_session());
    assert!(
        assistants(&recs).is_empty(),
        "no choice was taken for the answer"
    );
    let last = recs.last().unwrap();
    assert_eq!(last["reason"], "failed");
    let detail = last["detail"].as_str().unwrap();
    assert!(
        detail.contains("more than one choice") && detail.contains("`n`"),
        "{detail}"
    );
}
