//! `cairn sessions`, `cairn session ls|show|rm`.

use cairn_journal::Entry;
use cairn_sessions::{repository_root, ListFilter, Summary};
use serde::Serialize;

use crate::cli::{RmArgs, SessionsArgs, ShowArgs};
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;

pub fn list(ctx: &Context, args: &SessionsArgs) -> anyhow::Result<Code> {
    let repository = match (&args.repo, args.all) {
        (_, true) => None,
        (Some(dir), false) => {
            let dir = ctx.cwd.join(dir);
            if !dir.is_dir() {
                return Err(crate::exit::coded(
                    Code::Usage,
                    format!("--repo {}: no such directory", dir.display()),
                ));
            }
            Some(repository_root(&dir))
        }
        (None, false) => Some(repository_root(&ctx.cwd)),
    };
    let filter = ListFilter {
        repository: repository.clone(),
        statuses: args.status.clone(),
        limit: args.limit,
    };
    let list = filter.apply(crate::setup::everything(ctx)?);
    if args.json {
        output::json_list(&list)?;
        // The process ends when this returns: freeing ten thousand
        // summaries one string at a time would only delay its exit.
        std::mem::forget(list);
        return Ok(Code::Ok);
    }
    if list.is_empty() {
        let scope = match &repository {
            None => "in this store".to_string(),
            Some(r) => format!("for {} (use --all for every repository)", r.display()),
        };
        let status = if args.status.is_empty() {
            String::new()
        } else {
            format!(" with status {}", args.status.join(" or "))
        };
        output::text(&format!("no sessions{status} {scope}\n"))?;
        return Ok(Code::Ok);
    }
    let mut s = format!(
        "{:<26}  {:<16}  {:>5}  {:>9}  {:>9}  {:<14}  {}\n",
        "ID", "STATUS", "TURNS", "COST", "SIZE", "UPDATED", "NAME"
    );
    for x in &list {
        let status = if x.valid {
            x.status.clone()
        } else {
            "INVALID".into()
        };
        s.push_str(&format!(
            "{:<26}  {:<16}  {:>5}  {:>9}  {:>9}  {:<14}  {}\n",
            x.id,
            status,
            x.turns,
            x.cost.for_people(),
            output::size(x.bytes),
            output::ago(&x.updated),
            output::one_line(x.name.as_deref().unwrap_or(""), 40),
        ));
    }
    output::text(&s)?;
    Ok(Code::Ok)
}

#[derive(Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    records: Option<Vec<serde_json::Value>>,
}

pub fn show(ctx: &Context, args: &ShowArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&args.id)?;
    let mut summary = cairn_sessions::summarize(&ctx.store, &id);
    let loaded = if args.transcript || !args.json {
        Some(cairn_sessions::load(&ctx.store, &id))
    } else {
        None
    };
    // Reading it all may find what the tail alone could not.
    if let Some(Err(e)) = &loaded {
        summary.valid = false;
        summary.problem = Some(e.to_string());
    }
    if args.json {
        let records = match &loaded {
            Some(Ok(l)) => Some(
                l.scan
                    .records
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            // The summary already says what is wrong (valid: false, problem).
            Some(Err(_)) | None => None,
        };
        output::json(&Shown {
            summary: &summary,
            records,
        })?;
        return Ok(if summary.valid {
            Code::Ok
        } else {
            Code::Integrity
        });
    }
    let mut s = String::new();
    s.push_str(&format!("session   {}\n", summary.id));
    if let Some(n) = &summary.name {
        s.push_str(&format!("name      {}\n", output::one_line(n, 200)));
    }
    s.push_str(&format!("status    {}\n", summary.status));
    s.push_str(&format!("workspace {}\n", summary.workspace));
    s.push_str(&format!(
        "created   {} ({})\n",
        summary.created,
        output::ago(&summary.created)
    ));
    s.push_str(&format!(
        "updated   {} ({})\n",
        summary.updated,
        output::ago(&summary.updated)
    ));
    s.push_str(&format!(
        "turns     {}   records {}   journal {}   cost {}\n",
        summary.turns,
        summary.records,
        output::size(summary.bytes),
        summary.cost.for_people()
    ));
    if let Some(p) = &summary.parent {
        s.push_str(&format!("forked    from {} at seq {}\n", p.id, p.seq));
    }
    s.push_str(&format!("tail      {}\n", summary.tail));
    if let Some(p) = &summary.problem {
        s.push_str(&format!("INVALID   {p}\n"));
    }
    if let Some(Ok(l)) = &loaded {
        match &l.scan.torn {
            Some(t) if t.zeros => s.push_str(&format!(
                "preallocated {} bytes at offset {} (space its writer reserved; cut when it closes or by the next writer)\n",
                t.len, t.offset
            )),
            Some(t) => s.push_str(&format!(
                "torn tail {} bytes at offset {} (an interrupted write; ignored, cut by the next writer)\n",
                t.len, t.offset
            )),
            None => {}
        }
        if args.transcript {
            s.push('\n');
            for r in &l.scan.records {
                s.push_str(&format!(
                    "{:>5} {:<11} {}\n",
                    r.seq,
                    r.body.kind(),
                    // One line a record: its texts may hold newlines.
                    output::one_line(&describe(&r.body), 400)
                ));
            }
        } else {
            s.push('\n');
            for e in &l.state.conversation {
                s.push_str(&conversation_line(e));
            }
            let calls: Vec<&cairn_journal::ModelCall> = l
                .scan
                .records
                .iter()
                .filter_map(|r| match &r.body {
                    cairn_journal::RecordBody::ModelCall(m) => Some(m),
                    _ => None,
                })
                .collect();
            if !calls.is_empty() {
                s.push_str(&format!(
                    "\nmodel calls through the gateway: {}\n",
                    calls.len()
                ));
                for m in calls {
                    s.push_str(&format!("  {}\n", model_call_line(m)));
                }
            }
        }
    }
    output::text(&s)?;
    Ok(if summary.valid {
        Code::Ok
    } else {
        Code::Integrity
    })
}

fn conversation_line(e: &Entry) -> String {
    match e {
        Entry::User { text, .. } => format!("user      {}\n", output::one_line(text, 100)),
        Entry::Assistant {
            text,
            tool_calls,
            thinking,
            reasoning,
            ..
        } => {
            let mut s = String::new();
            if !thinking.is_empty() {
                s.push_str(&format!(
                    "  (thinking: {}, folded)\n",
                    thinking_size(thinking)
                ));
            }
            if let Some(r) = reasoning {
                s.push_str(&format!(
                    "  (reasoning: {} chars{}, folded)\n",
                    r.text.chars().count(),
                    if r.details.is_empty() {
                        String::new()
                    } else {
                        format!(", {} detail item(s)", r.details.len())
                    }
                ));
            }
            s.push_str(&format!("assistant {}\n", output::one_line(text, 100)));
            for c in tool_calls {
                s.push_str(&format!(
                    "  -> {} {}\n",
                    output::one_line(&c.name, 60),
                    output::one_line(&c.arguments.to_string(), 90)
                ));
            }
            s
        }
        Entry::ToolResult {
            name,
            outcome,
            output: out,
            ..
        } => format!(
            "  <- {} {}: {}\n",
            output::one_line(name, 60),
            outcome_str(*outcome),
            output::one_line(out, result_width(*outcome, 90))
        ),
    }
}

/// How much of a tool's output a line shows: `width` characters, but the
/// whole of an unknown outcome's notice, which says what to check before
/// going on and must not lose its end (DESIGN §9).
fn result_width(o: cairn_journal::Outcome, width: usize) -> usize {
    match o {
        cairn_journal::Outcome::Unknown => usize::MAX,
        _ => width,
    }
}

fn outcome_str(o: cairn_journal::Outcome) -> &'static str {
    match o {
        cairn_journal::Outcome::Ok => "ok",
        cairn_journal::Outcome::Error => "error",
        cairn_journal::Outcome::Unknown => "unknown",
        cairn_journal::Outcome::Refused => "refused",
    }
}

fn describe(body: &cairn_journal::RecordBody) -> String {
    use cairn_journal::RecordBody as B;
    match body {
        B::Meta(m) => format!("session {} in {}", m.run, m.workspace),
        B::User(u) => output::one_line(&u.text, 100),
        B::Assistant(a) => {
            let calls: Vec<_> = a.tool_calls.iter().map(|c| c.name.as_str()).collect();
            let mut notes = Vec::new();
            if let Some(r) = &a.stop_reason {
                notes.push(format!("stop {r}"));
            }
            if let (Some(asked), Some(answered)) = (&a.requested_model, &a.model) {
                notes.push(format!("asked {asked}, answered by {answered}"));
            }
            if !a.thinking.is_empty() {
                notes.push(format!("thinking {}", thinking_size(&a.thinking)));
            }
            if let Some(r) = &a.reasoning {
                notes.push(format!("reasoning {} chars", r.text.chars().count()));
            }
            if a.replay {
                notes.push("replayed".into());
            }
            let mut line = format!(
                "{}{} [{} in / {} out, {}{}]",
                output::one_line(&a.text, 70),
                if calls.is_empty() {
                    String::new()
                } else {
                    format!(" -> {}", calls.join(", "))
                },
                a.usage.input_tokens,
                a.usage.output_tokens,
                a.cost.for_people(),
                notes.iter().map(|n| format!(", {n}")).collect::<String>()
            );
            if let Some(r) = &a.refusal {
                line.push_str(&format!(" REFUSED: {}", output::one_line(r, 70)));
            }
            line
        }
        B::ToolStart(t) => format!("{} ({})", t.name, t.call),
        B::ToolResult(t) => format!(
            "{} ({}): {}",
            outcome_str(t.outcome),
            t.call,
            output::one_line(&t.output, result_width(t.outcome, 70))
        ),
        B::Snapshot(s) => format!("{} {}", s.label, s.snapshot),
        B::Reconcile(r) => match &r.unknown {
            Some(why) => format!("what changed outside the run is unknown: {why}"),
            None => format!("{} path(s) changed outside the run", r.changed.len()),
        },
        B::ModelCall(m) => model_call_line(m),
        B::Versioning(v) => format!(
            "workspace versioning stopped{}: {}",
            v.at.as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default(),
            v.reason
        ),
        B::Checkpoint(c) => c.checkpoint.clone(),
        B::Override(o) => {
            let f: Vec<_> = o.forced.iter().map(|f| f.field.as_str()).collect();
            format!("forced past: {}", f.join(", "))
        }
        B::Terminal(t) => format!(
            "{}{}",
            t.reason.as_str(),
            t.detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        _ => String::new(),
    }
}

pub fn rm(ctx: &Context, args: &RmArgs) -> anyhow::Result<Code> {
    crate::cmd::refuse_shared(ctx, "`cairn session rm`")?;
    // A removal that stopped part-way left no session to find by prefix or
    // name; given by its whole id, this one finishes it (and says so when
    // there is nothing to finish either).
    let id = match ctx.existing_run(&args.id) {
        Ok(id) => id,
        Err(e) => match (
            e.downcast_ref::<cairn_sessions::SessionError>(),
            cairn_store::RunId::parse(&args.id),
        ) {
            (Some(cairn_sessions::SessionError::NoMatch { .. }), Ok(id)) => id,
            _ => return Err(e),
        },
    };
    let options = cairn_sessions::RemoveOptions::new().with_forks(args.with_forks);
    // Their stored model responses hold prompts: they go too, first.
    let removed = cairn_sessions::remove(&ctx.store, &id, options)?;
    let mut s = String::new();
    for run in &removed.finished {
        if *run != id {
            s.push_str(&format!(
                "finished the interrupted removal of session {run}\n"
            ));
        }
    }
    for run in &removed.runs {
        if *run == id {
            s.push_str(&format!("removed session {run}"));
        } else {
            s.push_str(&format!("removed fork {run}\n"));
        }
    }
    if removed.finished.contains(&id) {
        s.push_str(" (finishing its interrupted removal)");
    }
    if removed.responses > 0 {
        s.push_str(&format!(
            ", and {} stored model response(s)",
            removed.responses
        ));
    }
    s.push_str(" (workspace objects stay in the store until `cairn prune`)\n");
    output::text(&s)?;
    Ok(Code::Ok)
}

/// The size of a turn's thinking, for a folded line: blocks and characters.
fn thinking_size(thinking: &[cairn_journal::Thinking]) -> String {
    let (mut chars, mut redacted) = (0, 0);
    for t in thinking {
        match t {
            cairn_journal::Thinking::Thinking { thinking, .. } => chars += thinking.chars().count(),
            cairn_journal::Thinking::RedactedThinking { .. } => redacted += 1,
        }
    }
    let mut s = format!("{} block(s), {chars} chars", thinking.len());
    if redacted > 0 {
        s.push_str(&format!(", {redacted} redacted"));
    }
    s
}

/// One model call through the gateway, for people.
fn model_call_line(m: &cairn_journal::ModelCall) -> String {
    let mut line = format!(
        "{} {} {} [{} in / {} out, {}]",
        m.endpoint,
        output::one_line(m.model.as_deref().unwrap_or("?"), 80),
        m.status,
        m.usage.input_tokens,
        m.usage.output_tokens,
        m.cost.for_people()
    );
    if let Some(a) = &m.answered_by {
        line.push_str(&format!(", answered by {}", output::one_line(a, 80)));
    }
    if m.stream {
        line.push_str(", streamed");
    }
    if m.replay {
        line.push_str(", replayed from the store");
    }
    if m.delivered == cairn_journal::Delivered::ClientGone {
        line.push_str(", client gone before the end");
    }
    if let Some(e) = &m.error {
        line.push_str(&format!(", failed: {}", output::one_line(e, 60)));
    }
    line
}
