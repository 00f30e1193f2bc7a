//! `GET /openapi.json`: the API described (OpenAPI 3.0), kept next to the
//! routes it describes.

use axum::Json;
use serde_json::{json, Value};

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}, "description": "a session id"})
}

fn snap_param() -> Value {
    json!({"name": "snap", "in": "path", "required": true, "schema": {"type": "string"}, "description": "a snapshot id"})
}

fn ok_json(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

/// Why a request is refused with 403.
const FORBIDDEN: &str = "a Host that is not a loopback name (`cairn_host`), or another origin's request (`cairn_cross_site`)";

/// Why a request is refused with 415.
const UNSUPPORTED: &str =
    "not `Content-Type: application/json`, which every route that changes something takes (`cairn_content_type`)";

/// A JSON request body: `schema`; `{}` (or no bytes, with the JSON
/// content type) when the route needs nothing.
fn json_body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

/// The responses of a route that changes something: `ok` under `status`.
fn mutation(status: &str, ok: Value) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(status.into(), ok);
    for (code, what) in [
        ("400", "bad input"),
        ("401", "the token is missing or wrong"),
        ("403", FORBIDDEN),
        ("404", "no such session or checkpoint"),
        (
            "409",
            "refused: the session is running, or the resume guard",
        ),
        ("415", UNSUPPORTED),
        (
            "500",
            "a record does not verify (`integrity`), or a failure",
        ),
    ] {
        m.insert(code.into(), error_response(what));
    }
    Value::Object(m)
}

/// The document.
pub fn spec() -> Value {
    let common = |ok: Value| {
        json!({
            "200": ok,
            "400": error_response("bad input"),
            "401": error_response("the token is missing or wrong"),
            "403": error_response(FORBIDDEN),
            "404": error_response("no such session"),
            "409": error_response("refused (a writer holds the session)"),
            "500": error_response("a record does not verify (`integrity`), or a failure")
        })
    };
    let mut events = common(
        json!({"description": "an event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}),
    );
    events["503"] = error_response(
        "`busy`: the server serves as many live streams as it may; retry after `Retry-After` seconds",
    );
    json!({
        "openapi": "3.0.3",
        "info": {"title": "cairn", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Durable agent sessions over HTTP (DESIGN §8). Errors are `{\"error\": {code, class, message}}`; class is the exit-code class of the CLI. Every request that changes something is `Content-Type: application/json` (send `{}` when there is nothing to say) and is refused when it comes from another origin's page. With a token, send it as `Authorization: Bearer TOKEN` or `x-cairn-token`; a browser logs in once (`GET /?token=TOKEN`, or the form at `/`) and holds a session cookie."},
        "paths": {
            "/v1/login": {"post": {
                "summary": "A browser's login: the server's token, once, for an HttpOnly; SameSite=Strict session cookie that every route takes (a server without a token answers 204 and sets none)",
                "requestBody": json_body(json!({"type": "object", "required": ["token"], "properties": {"token": {"type": "string"}}})),
                "responses": {
                    "204": {"description": "logged in: `Set-Cookie: cairn_session_PORT=…`"},
                    "400": error_response("bad input"),
                    "401": error_response("not this server's token"),
                    "403": error_response(FORBIDDEN),
                    "415": error_response(UNSUPPORTED)
                }
            }},
            "/v1/sessions": {"get": {
                "summary": "List sessions, newest first",
                "parameters": [
                    {"name": "repo", "in": "query", "schema": {"type": "string"}, "description": "only this repository's sessions"},
                    {"name": "status", "in": "query", "schema": {"type": "string"}}
                ],
                "responses": common(ok_json("sessions", json!({"type": "array", "items": {"$ref": "#/components/schemas/Summary"}})))
            }, "post": {
                "summary": "Start a session working on a task (as `cairn run`), in the background",
                "requestBody": json_body(json!({"type": "object", "required": ["task", "workspace"], "properties": {
                    "task": {"type": "string"}, "workspace": {"type": "string"}, "model": {"type": "string"}, "name": {"type": "string"},
                    "max_turns": {"type": "integer", "minimum": 0}, "max_tokens": {"type": "integer", "minimum": 0},
                    "approve": {"type": "string", "enum": ["never", "shell", "writes"]}}})),
                "responses": mutation("201", ok_json("started", json!({"$ref": "#/components/schemas/Accepted"})))
            }},
            "/v1/sessions/{id}/resume": {"post": {
                "summary": "Resume a session, optionally with a follow-up (as `cairn resume ID [TEXT]`)",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object", "properties": {"text": {"type": "string"},
                    "approve": {"type": "string", "enum": ["never", "shell", "writes"]}}})),
                "responses": mutation("202", ok_json("resuming", json!({"$ref": "#/components/schemas/Accepted"})))
            }},
            "/v1/search": {"get": {
                "summary": "The records of every session that say a text (your messages, the model's answers, tool output), newest session first; bounded by hits and by 3 s of reading",
                "parameters": [
                    {"name": "q", "in": "query", "required": true, "schema": {"type": "string", "minLength": 1, "maxLength": 200}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}}],
                "responses": common(ok_json("hits", json!({"type": "object", "required": ["hits", "searched", "unreadable", "complete"], "properties": {
                    "hits": {"type": "array", "items": {"type": "object", "required": ["id", "seq", "kind", "excerpt"]}},
                    "searched": {"type": "integer"}, "unreadable": {"type": "integer"}, "complete": {"type": "boolean"}}})))
            }},
            "/v1/sessions/{id}/approval": {
                "get": {
                    "summary": "The call a run waits on for your yes (null when none): a run this server drives, or `cairn run --approve` in a terminal on this host",
                    "parameters": [id_param()],
                    "responses": common(ok_json("the question", json!({"type": "object", "nullable": true, "properties": {
                        "asked": {"type": "string"},
                        "call": {"type": "object", "required": ["id", "name", "arguments"]}, "preview": {"type": "string", "nullable": true}}})))
                },
                "post": {
                    "summary": "Answer the waiting call: run it, or decline it (it is not run; the model is told)",
                    "parameters": [id_param()],
                    "requestBody": json_body(json!({"type": "object", "required": ["call", "decision"], "properties": {
                        "call": {"type": "string"}, "decision": {"type": "string", "enum": ["run", "decline"]}}})),
                    "responses": mutation("200", ok_json("the answer, and whether the run heard it", json!({"type": "object", "required": ["call", "decision", "heard"]})))
                }
            },
            "/v1/sessions/{id}/suspend": {"post": {
                "summary": "Suspend a run this server drives, after the step in flight",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object"})),
                "responses": mutation("202", ok_json("suspending", json!({"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}}})))
            }},
            "/v1/sessions/{id}/rewind": {"post": {
                "summary": "Put the workspace back to before a node (or a whole snapshot), banking first (as `cairn rewind`)",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object", "properties": {
                    "to": {"type": "string"}, "snapshot": {"type": "string"}, "scope": {"type": "string", "enum": ["run", "full"]}, "fork": {"type": "boolean"}}})),
                "responses": mutation("200", ok_json("the restore report, with `fork` (the new session's id) when one was asked for, or `fork_error` when the fork failed after the files were restored (`bank` undoes them)", json!({"type": "object", "required": ["target", "bank", "written", "deleted"]})))
            }},
            "/v1/sessions/{id}/rewind-points": {"get": {
                "summary": "Your messages, each a point to go back to, with the files its turns changed (the TUI's rewind picker)",
                "parameters": [id_param()],
                "responses": common(ok_json("points, first first", json!({"type": "array", "items": {"type": "object", "required": ["number", "seq", "text", "name", "files"], "properties": {
                    "number": {"type": "integer"}, "seq": {"type": "integer"}, "text": {"type": "string"}, "turn": {"type": "integer", "nullable": true},
                    "name": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}}}})))
            }},
            "/v1/sessions/{id}/rewind-preview": {"post": {
                "summary": "What going back to a point in the files would change now, and what it would leave alone (banks and journals the current state; changes no file)",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object", "required": ["seq"], "properties": {"seq": {"type": "integer", "minimum": 0}}})),
                "responses": mutation("200", ok_json("the preview", json!({"type": "object", "required": ["target", "bank", "changes", "left_alone"]})))
            }},
            "/v1/sessions/{id}/rewind-point": {"post": {
                "summary": "Go back to a point: the files (code), the conversation as a fork before the message (conversation), or both",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object", "required": ["seq"], "properties": {"seq": {"type": "integer", "minimum": 0}, "action": {"type": "string", "enum": ["code", "conversation", "both"]}}})),
                "responses": mutation("200", ok_json("what was done: `report` (its `bank` undoes the files), `fork` (the new session), or `fork_error`", json!({"type": "object"})))
            }},
            "/v1/checkpoints/{cp}/restore": {"post": {
                "summary": "Restore a checkpoint (as `cairn checkpoint restore CP`)",
                "parameters": [{"name": "cp", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": json_body(json!({"type": "object"})),
                "responses": mutation("200", ok_json("the restore report", json!({"type": "object"})))
            }},
            "/v1/sessions/{id}": {"get": {
                "summary": "One session's summary",
                "parameters": [id_param()],
                "responses": common(ok_json("the summary", json!({"$ref": "#/components/schemas/Summary"})))
            }},
            "/v1/sessions/{id}/records": {"get": {
                "summary": "Verified records after a journal seq, paged",
                "parameters": [id_param(),
                    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": crate::api::MAX_PAGE}},
                    {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 0}, "description": "the last `limit` records before this journal seq"},
                    {"name": "tail", "in": "query", "schema": {"type": "boolean"}, "description": "true: the last `limit` records"},
                    {"name": "render", "in": "query", "schema": {"type": "string", "enum": ["html"]}, "description": "html: user and assistant records also carry `html`, their text as Markdown rendered to safe HTML"}],
                "responses": common(ok_json("a page", json!({"$ref": "#/components/schemas/RecordsPage"})))
            }},
            "/v1/sessions/{id}/events": {"get": {
                "summary": "The live stream (SSE): subscribed, record, part, delta, gap, error",
                "parameters": [id_param(),
                    {"name": "resume_from", "in": "query", "schema": {"type": "integer", "minimum": 0}, "description": "the last live seq received (or Last-Event-ID)"}],
                "responses": events
            }},
            "/v1/sessions/{id}/fork": {"post": {
                "summary": "Fork the session at a record (default: its last)",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object", "properties": {"at": {"type": "integer", "minimum": 1}}})),
                "responses": mutation("201", ok_json("the fork", json!({"type": "object", "required": ["id", "parent", "seq"], "properties": {"id": {"type": "string"}, "parent": {"type": "string"}, "seq": {"type": "integer"}}})))
            }},
            "/v1/sessions/{id}/snapshots": {"get": {
                "summary": "Workspace snapshots, newest first, with their labels",
                "parameters": [id_param()],
                "responses": common(ok_json("snapshots", json!({"type": "array", "items": {"type": "object"}})))
            }},
            "/v1/sessions/{id}/diff": {"get": {
                "summary": "What differs between two snapshots: per-file line counts and unified diffs",
                "parameters": [id_param(),
                    {"name": "from", "in": "query", "required": true, "schema": {"type": "string"}},
                    {"name": "to", "in": "query", "required": true, "schema": {"type": "string"}}],
                "responses": common(ok_json("files", json!({"type": "array", "items": {"$ref": "#/components/schemas/DiffFile"}})))
            }},
            "/v1/sessions/{id}/snapshots/{snap}/tree": {"get": {
                "summary": "The files of a snapshot, sorted by path",
                "parameters": [id_param(), snap_param()],
                "responses": common(ok_json("files", json!({"type": "array", "items": {"type": "object", "required": ["path", "size", "mode"], "properties": {
                    "path": {"type": "string"}, "size": {"type": "integer"}, "mode": {"type": "integer"}}}})))
            }},
            "/v1/sessions/{id}/snapshots/{snap}/file": {"get": {
                "summary": "One file as a snapshot holds it: its text, or that it is binary or too large",
                "parameters": [id_param(), snap_param(),
                    {"name": "path", "in": "query", "required": true, "schema": {"type": "string"}}],
                "responses": common(ok_json("the file", json!({"type": "object", "required": ["path", "size", "mode", "binary", "too_large"], "properties": {
                    "path": {"type": "string"}, "size": {"type": "integer"}, "mode": {"type": "integer"},
                    "text": {"type": "string", "nullable": true}, "binary": {"type": "boolean"}, "too_large": {"type": "boolean"}}})))
            }},
            "/v1/sessions/{id}/checkpoints": {"get": {
                "summary": "Checkpoints, newest first",
                "parameters": [id_param()],
                "responses": common(ok_json("checkpoints", json!({"type": "array", "items": {"type": "object"}})))
            }, "post": {
                "summary": "Save the session as a checkpoint (as `cairn checkpoint save ID`)",
                "parameters": [id_param()],
                "requestBody": json_body(json!({"type": "object"})),
                "responses": mutation("201", ok_json("the checkpoint", json!({"type": "object", "required": ["id", "seq"]})))
            }}
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "class", "message"], "properties": {
                "code": {"type": "string"}, "class": {"type": "string", "enum": ["usage", "refused", "integrity", "failure"]}, "message": {"type": "string"}}}}},
            "Summary": {"type": "object", "required": ["id", "status", "created", "updated", "workspace", "turns", "records", "tail", "cost", "valid"], "properties": {
                "id": {"type": "string"}, "name": {"type": "string", "nullable": true}, "status": {"type": "string"},
                "created": {"type": "string"}, "updated": {"type": "string"}, "workspace": {"type": "string"},
                "turns": {"type": "integer"}, "records": {"type": "integer"}, "bytes": {"type": "integer"}, "tail": {"type": "string"},
                "cost": {"type": "object", "properties": {"state": {"type": "string"}, "usd": {"type": "number", "nullable": true}}},
                "parent": {"type": "object", "nullable": true, "properties": {"id": {"type": "string"}, "seq": {"type": "integer"}}},
                "valid": {"type": "boolean"}, "problem": {"type": "string"}}},
            "RecordsPage": {"type": "object", "required": ["records", "last_seq"], "properties": {
                "records": {"type": "array", "items": {"type": "object", "required": ["v", "seq", "prev", "ts", "kind"], "properties": {"html": {"type": "string"}}}},
                "last_seq": {"type": "integer"}, "next_after": {"type": "integer", "nullable": true},
                "prev_before": {"type": "integer", "nullable": true}}},
            "Accepted": {"type": "object", "required": ["id", "status"], "properties": {"id": {"type": "string"}, "status": {"type": "string"}}},
            "DiffFile": {"type": "object", "required": ["path", "change", "added", "removed", "binary"], "properties": {
                "path": {"type": "string"}, "change": {"type": "string", "enum": ["added", "modified", "deleted", "mode"]},
                "added": {"type": "integer"}, "removed": {"type": "integer"}, "binary": {"type": "boolean"},
                "unified": {"type": "string", "nullable": true}}}
        }}
    })
}

/// `GET /openapi.json`.
pub async fn document() -> Json<Value> {
    Json(spec())
}
