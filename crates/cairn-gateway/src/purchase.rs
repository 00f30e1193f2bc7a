//! A recorded call (DESIGN §7): served from the store, or bought from the
//! upstream and kept.
//!
//! The order of a purchase, which is the gateway's promise:
//! 1. the upstream's bytes are forwarded to the client as they arrive, and
//!    teed into memory — all but the final event (`data: [DONE]`,
//!    `message_stop`, `response.completed`; for a whole body, all of it);
//! 2. when the upstream response is complete, it is made durable (bodies in
//!    the pool, then its entry in the response store) and a `model_call`
//!    record is appended to the session's journal;
//! 3. only then is the final event released, so a client never sees the end
//!    of a response that is not on disk;
//! 4. once the client has taken it, the entry is marked delivered (see
//!    `delivery`: a stream when its final event was taken, a whole body by
//!    what the client's connection does next). The record's `delivered`
//!    says whether the client was still there at step 2. A client that goes
//!    away does not stop the purchase: the upstream is read to its end and
//!    kept (`delivered: client_gone`), and the retry is served from the
//!    store.
//!
//! A response that is the provider's error rather than an answer — an error
//! chunk or event inside a 200 stream (OpenRouter, Groq, vLLM, Anthropic's
//! `event: error`, Responses' `error` and `response.failed`), or an error
//! body — is forwarded byte for byte and ends as the provider ended it (the
//! client's SDK raises the provider's error, as it does direct). Its
//! `model_call` carries the provider's status and message; its bytes go to
//! the pool, but it gets no entry: a failed call is never served again.
//! Only a stream the upstream cut short is cut short for the client too.
//!
//! A replay is byte-identical to what the upstream sent (or, when the retry
//! asks for the other form, the same response re-encoded), carries
//! `cairn-replay: true`, and is journaled with cost zero.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use cairn_journal::{Cost, Delivered, ModelCall, RecordBody};
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode};
use tokio::sync::mpsc;

use crate::commit::Job;
use crate::delivery::{Chunk, Deliveries, Delivery, Ending};
use crate::filing::Filed;
use crate::forms::{self, Api, Parsed, StreamWatch};
use crate::inflight::{self, InFlightPurchase, Purchase, RunningGuard, Turn};
use crate::key::RequestFacts;
use crate::replay::{decide, Decision, Match};
use crate::server::{
    client_headers, error, header, read_request, unreachable_upstream, upstream_for,
    upstream_headers, Inner, Upstream,
};
use crate::GatewayError;
use cairn_calls::{Entry, Stored};

/// Rule 3 of the server: a recorded route.
pub(crate) async fn recorded(g: Arc<Inner>, api: Api, req: Request) -> Response {
    let (parts, body, path_and_query) = match read_request(&g, req).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    // The judge of the connection the request came on (`serve`).
    let conn = parts.extensions.get::<Deliveries>().cloned();
    let facts = RequestFacts::of(
        parts.method.as_str(),
        &path_and_query,
        &parts.headers,
        &body,
    );
    let key = facts.key.as_str().to_owned();
    let mut idempotency_seen = false;
    if let Some(idem) = facts.idempotency_key.clone() {
        let g2 = g.clone();
        match blocking(move || g2.responses.idempotency(&idem)).await {
            Ok(Some(k)) if k != key => {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    "this Idempotency-Key was used with another request; use a new key for a new request",
                )
            }
            Ok(Some(_)) => idempotency_seen = true,
            Ok(None) => {}
            Err(e) => return internal(&e),
        }
    }
    let session = {
        let (g2, client) = (g.clone(), facts.client_session.clone());
        match blocking(move || g2.sessions.for_client(client.as_ref())).await {
            Ok(s) => s,
            Err(e) => return internal(&e),
        }
    };
    let up = upstream_for(&g, parts.uri.path(), &parts.headers);
    let mut waited = false;
    loop {
        let stored = {
            let (g2, k) = (g.clone(), key.clone());
            match blocking(move || g2.responses.get(&k)).await {
                Ok(s) => s,
                Err(e) => return internal(&e),
            }
        };
        let found = stored.as_ref().map(|s| Match {
            servable: (200..300).contains(&s.entry.status),
            delivered: s.entry.delivered,
        });
        // A duplicate that waited for the purchase is served what it bought.
        let decision = match found {
            Some(m) if waited && m.servable => Decision::Serve,
            _ => decide(g.config.replay, found, facts.retry, idempotency_seen),
        };
        match (decision, stored) {
            (Decision::Serve, Some(stored)) => {
                if let Some(r) =
                    serve_stored(&g, api, &facts, stored, &session, conn.as_ref()).await
                {
                    return r;
                }
                // Not servable in the form asked for: buy it.
            }
            (Decision::OfflineMiss, _) => return offline_miss(&key),
            _ => {}
        }
        if g.config.replay.offline {
            // A stored response that cannot be served in the form asked
            // for: under --offline it is still not bought.
            return offline_miss(&key);
        }
        match g.inflight.begin(&key) {
            Turn::Buy(guard) => {
                return buy(
                    g,
                    api,
                    Call {
                        facts,
                        up,
                        body,
                        session,
                        guard,
                        conn,
                        method: parts.method,
                        headers: parts.headers,
                        path_and_query,
                    },
                )
                .await
            }
            Turn::Wait(rx) => {
                inflight::wait(rx).await;
                waited = true;
            }
        }
    }
}

/// `--offline` and nothing servable for `key`.
fn offline_miss(key: &str) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "cairn_offline_miss",
        &format!(
            "the gateway is offline and holds no response it can serve for this request (key {key}); run it without --offline to buy it"
        ),
    )
}

/// What a purchase needs.
struct Call {
    facts: RequestFacts,
    up: Upstream,
    body: Bytes,
    session: Filed,
    guard: Purchase,
    /// The judge of the client's connection.
    conn: Option<Deliveries>,
    method: http::Method,
    headers: http::HeaderMap,
    path_and_query: String,
}

/// Buys on a task of its own: a client that goes away before the
/// upstream answered must not cancel a request the provider already has
/// (it bills it), so the purchase runs to its end whatever happens to the
/// handler, and the gateway's shutdown waits for it.
async fn buy(g: Arc<Inner>, api: Api, call: Call) -> Response {
    let running = g.running.start(InFlightPurchase {
        endpoint: api.path().to_owned(),
        model: call.facts.model.clone(),
        session: call
            .session
            .run()
            .map(|r| r.to_string())
            .unwrap_or_default(),
        key: call.facts.key.as_str().to_owned(),
        started: Instant::now(),
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(buy_here(g, api, call, running).await);
    });
    rx.await.unwrap_or_else(|_| {
        crate::server::error(
            StatusCode::BAD_GATEWAY,
            "cairn_gateway",
            "the purchase stopped before it answered",
        )
    })
}

async fn buy_here(g: Arc<Inner>, api: Api, call: Call, running: RunningGuard) -> Response {
    let started = Instant::now();
    let url = format!("{}{}", call.up.base, call.path_and_query);
    let sent = g
        .client
        .request(call.method.clone(), &url)
        .headers(upstream_headers(&g, &call.up, &call.headers))
        .body(call.body.clone())
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            // reqwest's message ends with the URL, the client's query
            // string in it: a key sent there must not reach the journal.
            let e = e.without_url();
            let why = format!("the upstream {} could not be reached: {e}", call.up.shown);
            let reply = unreachable_upstream(&call.up, e);
            return refused(&g, api, &call, started, why, reply).await;
        }
    };
    let limit = g.config.max_response;
    if resp
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit))
    {
        // Declared too large: refused before a byte is read.
        let why = over_limit(limit);
        let reply = error(StatusCode::BAD_GATEWAY, "upstream_response_too_large", &why);
        return refused(&g, api, &call, started, why, reply).await;
    }
    let status = resp.status();
    let headers = resp.headers().clone();
    let content_type = header(&headers, "content-type").unwrap_or_default();
    let (tx, rx) = mpsc::unbounded_channel();
    let ending = Ending::of(
        &g.responses,
        call.conn.as_ref(),
        call.facts.key.as_str(),
        content_type.starts_with("text/event-stream"),
    );
    tokio::spawn(tee(
        running,
        g,
        api,
        call,
        Upstreamed {
            resp,
            status,
            content_type,
            started,
        },
        tx,
    ));
    let mut out = Response::new(Body::from_stream(Delivery::new(rx, ending)));
    *out.status_mut() = status;
    *out.headers_mut() = client_headers(&headers);
    out
}

/// A purchase that got no response to forward: `reply` for the client, and
/// a failed `model_call` saying `why` on the record.
async fn refused(
    g: &Arc<Inner>,
    api: Api,
    call: &Call,
    started: Instant,
    why: String,
    reply: Response,
) -> Response {
    let record = ModelCall {
        status: StatusCode::BAD_GATEWAY.as_u16(),
        error: Some(why),
        ..base_record(api, &call.facts, started)
    };
    let (g2, session, body) = (g.clone(), call.session.clone(), call.body.clone());
    let journaled = blocking(move || {
        // Held until the record that names the request body is appended.
        let held = g2.responses.lock()?;
        let (_, request) = g2.responses.put_bodies(&held, b"", Some(&body))?;
        append(&session, ModelCall { request, ..record })
    })
    .await;
    if let Err(e) = journaled {
        tracing::error!("a failed model call was not journaled: {e}");
    }
    reply
}

/// Why a response over the gateway's limit was not kept.
fn over_limit(limit: usize) -> String {
    format!(
        "the upstream's response is over the gateway's limit of {} MiB; it was not kept (raise the limit with --max-response-mb)",
        limit >> 20
    )
}

/// The upstream's response, as it began.
struct Upstreamed {
    resp: reqwest::Response,
    status: StatusCode,
    content_type: String,
    started: Instant,
}

/// Steps 1–3 of the module doc, on a task of its own: it goes on when the
/// client is gone.
async fn tee(
    running: RunningGuard,
    g: Arc<Inner>,
    api: Api,
    call: Call,
    up: Upstreamed,
    tx: mpsc::UnboundedSender<Chunk>,
) {
    let streamed = up.content_type.starts_with("text/event-stream");
    let mut watch = streamed.then(|| StreamWatch::new(api).max_event(g.config.max_event));
    let mut stream = up.resp.bytes_stream();
    let (mut buf, mut sent, mut gone, mut cut) = (Vec::new(), 0usize, false, None);
    // Over a limit, the upstream is read no further (dropping the stream
    // closes its connection) and what is held is not sent on.
    let mut over = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => {
                if buf.len().saturating_add(c.len()) > g.config.max_response {
                    cut = Some(over_limit(g.config.max_response));
                    over = true;
                    break;
                }
                buf.extend_from_slice(&c);
                if let Some(w) = watch.as_mut() {
                    if let Err(e) = w.feed(&c) {
                        cut = Some(format!("the upstream's response was not kept: {e}"));
                        over = true;
                        break;
                    }
                    let upto = usize::try_from(w.forwardable())
                        .unwrap_or(buf.len())
                        .min(buf.len());
                    if upto > sent {
                        gone |= tx
                            .send(Ok(Bytes::copy_from_slice(&buf[sent..upto])))
                            .is_err();
                        sent = upto;
                    }
                }
            }
            Err(e) => {
                let e = e.without_url();
                cut = Some(format!("the upstream stream broke: {e}"));
                break;
            }
        }
    }
    let parsed = match watch.as_mut() {
        Some(w) => {
            w.finish();
            w.parsed()
        }
        None => forms::parse_whole(api, &buf),
    };
    // The provider's own error in place of a response (an error chunk or
    // event in a 200 stream, an error body): it goes to the client whole
    // and ends as the provider ended it, and is journaled with the
    // provider's message — but it is not a response, so it is never kept
    // to be served again.
    let provider_error = match watch.as_ref() {
        Some(w) => w.upstream_error().map(str::to_owned),
        None => forms::whole_error(api, &buf),
    };
    // A stream the upstream finished is kept even when its connection broke
    // after that (before `message_stop` or `[DONE]`): the client's retry is
    // served from the store rather than bought again.
    let complete = up.status.is_success()
        && !over
        && provider_error.is_none()
        && if streamed {
            parsed.complete
        } else {
            cut.is_none()
        };
    if up.status.is_success() && !complete && cut.is_none() && provider_error.is_none() {
        cut = Some("the upstream response ended before it was complete".into());
    }
    let error = match (provider_error, &cut) {
        (Some(e), cut) => Some(format!(
            "the upstream answered {} and reported an error: {e}{}",
            up.status.as_u16(),
            cut.as_ref()
                .map(|c| format!("; then {c}"))
                .unwrap_or_default()
        )),
        (None, cut) => cut.clone(),
    };
    gone |= tx.is_closed();
    let record = ModelCall {
        status: up.status.as_u16(),
        usage: parsed.usage.unwrap_or_default(),
        cost: price(&g, &call.up, &call.facts, &parsed, up.status),
        answered_by: parsed
            .model
            .clone()
            .filter(|m| Some(m) != call.facts.model.as_ref()),
        delivered: if gone {
            Delivered::ClientGone
        } else {
            Delivered::Complete
        },
        error,
        choices: parsed.choices.clone(),
        ..base_record(api, &call.facts, up.started)
    };
    let entry = complete.then(|| Entry {
        key: call.facts.key.as_str().to_owned(),
        run: String::new(),
        endpoint: api.path().to_owned(),
        status: up.status.as_u16(),
        stream: streamed,
        content_type: up.content_type.clone(),
        body: String::new(),
        request: None,
        idempotency_key: call.facts.idempotency_key.clone(),
        delivered: false,
        stored: cairn_journal::now_rfc3339(),
    });
    let run = call
        .session
        .run()
        .map(|r| r.to_string())
        .unwrap_or_default();
    let durable = g
        .committer
        .commit(|done| Job {
            entry: entry.map(|e| Entry { run, ..e }),
            body: buf.clone(),
            request: call.body.to_vec(),
            record,
            session: call.session.clone(),
            done,
        })
        .await;
    match durable {
        Ok(()) => {
            running.stored();
            if crate::FAULT_INJECTION && g.config.stall_before_final {
                std::future::pending::<()>().await;
            }
            if sent < buf.len() && !over {
                let _ = tx.send(Ok(Bytes::copy_from_slice(&buf[sent..])));
            }
            if let Some(why) = cut {
                // A cut response must not look complete to the client.
                let _ = tx.send(Err(std::io::Error::other(why)));
            }
        }
        Err(e) => {
            // Not on disk: the client must not see the end of it.
            tracing::error!("a model response was not made durable: {e}");
            let _ = tx.send(Err(std::io::Error::other(e.to_string())));
        }
    }
    drop(tx);
    drop(call.guard);
}

/// The fields every `model_call` of a request shares.
fn base_record(api: Api, facts: &RequestFacts, started: Instant) -> ModelCall {
    ModelCall {
        endpoint: api.path().to_owned(),
        model: facts.model.clone(),
        key: facts.key.as_str().to_owned(),
        stream: facts.stream,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        client: facts.client_session.as_ref().map(|c| c.id.clone()),
        cost: Cost::ZERO,
        ..ModelCall::default()
    }
}

/// What a bought call cost: priced by the model that answered; an error
/// without usage is free, a success without usage unknown unless free
/// anyway (`Pricing::price_reported`).
fn price(
    g: &Inner,
    up: &Upstream,
    facts: &RequestFacts,
    parsed: &Parsed,
    status: StatusCode,
) -> Cost {
    if parsed.usage.is_none() && !status.is_success() {
        return Cost::ZERO;
    }
    let model = parsed
        .model
        .as_deref()
        .or(facts.model.as_deref())
        .unwrap_or("");
    g.pricing
        .price_reported(up.provider, model, Some(&up.shown), parsed.usage)
}

/// A stored response served again; `None` when it cannot be served in the
/// form the request asks for (then it is bought).
async fn serve_stored(
    g: &Arc<Inner>,
    api: Api,
    facts: &RequestFacts,
    stored: Stored,
    session: &Filed,
    conn: Option<&Deliveries>,
) -> Option<Response> {
    let started = Instant::now();
    let g2 = g.clone();
    let s2 = stored.clone();
    let body = match blocking(move || g2.responses.body(&s2)).await {
        Ok(b) => b,
        Err(e) => return Some(internal(&e)),
    };
    let e = &stored.entry;
    let (bytes, content_type, streamed) = if e.stream == facts.stream {
        (body, e.content_type.clone(), e.stream)
    } else if facts.stream {
        match forms::whole_to_stream(api, &body) {
            Ok(b) => (b, "text/event-stream".to_owned(), true),
            Err(err) => {
                tracing::warn!("stored response {} not served as a stream: {err}", e.key);
                return None;
            }
        }
    } else {
        match forms::stream_to_whole(api, &body) {
            Ok(b) => (b, "application/json".to_owned(), false),
            Err(err) => {
                tracing::warn!("stored response {} not served whole: {err}", e.key);
                return None;
            }
        }
    };
    let parsed = if streamed {
        // A stored stream was under the limits when it was bought; read
        // as far as it goes.
        let mut w = StreamWatch::new(api).max_event(g.config.max_event);
        if let Err(err) = w.feed(&bytes) {
            tracing::warn!("stored response {} not read whole: {err}", e.key);
        }
        w.finish();
        w.parsed()
    } else {
        forms::parse_whole(api, &bytes)
    };
    let record = ModelCall {
        status: e.status,
        usage: parsed.usage.unwrap_or_default(),
        cost: Cost::ZERO,
        replay: true,
        answered_by: parsed.model.filter(|m| Some(m) != facts.model.as_ref()),
        request: e.request.clone(),
        response: Some(e.body.clone()).filter(|b| !b.is_empty()),
        choices: parsed.choices,
        ..base_record(api, facts, started)
    };
    let s = session.clone();
    if let Err(err) = blocking(move || append(&s, record)).await {
        return Some(internal(&err));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(Ok(Bytes::from(bytes)));
    drop(tx);
    let ending = Ending::of(&g.responses, conn, &e.key, streamed);
    let mut out = Response::new(Body::from_stream(Delivery::new(rx, ending)));
    *out.status_mut() = StatusCode::from_u16(e.status).unwrap_or(StatusCode::OK);
    let h = out.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    h.insert("cairn-replay", HeaderValue::from_static("true"));
    Some(out)
}

fn append(session: &Filed, record: ModelCall) -> Result<(), GatewayError> {
    session.append_all(vec![RecordBody::ModelCall(record)])
}

/// Runs blocking IO (the store, the journal) off the async threads.
async fn blocking<T: Send + 'static, E: Into<GatewayError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, GatewayError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| GatewayError::Internal {
            reason: format!("a storage task failed: {e}"),
        })?
        .map_err(Into::into)
}

fn internal(e: &GatewayError) -> Response {
    tracing::error!("gateway: {e}");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "cairn_gateway",
        &e.to_string(),
    )
}
