//! `cairn vm start|ls|stop` (DESIGN §13); VM checkpoints go through
//! `cairn checkpoint save|restore` and `cairn fork --at CP`, which call
//! `cairn_vm`'s save, restore and fork for a VM session.

use cairn_store::Store;

use crate::cli::{SessionJsonArgs, VmCommand, VmLsArgs, VmStartArgs};
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;

pub fn run(ctx: &Context, c: VmCommand) -> anyhow::Result<Code> {
    match c {
        VmCommand::Start(a) => start(ctx, &a),
        VmCommand::Ls(a) => ls(ctx, &a),
        VmCommand::Stop(a) => stop(ctx, &a),
    }
}

fn start(ctx: &Context, a: &VmStartArgs) -> anyhow::Result<Code> {
    let command = (!a.command.is_empty()).then(|| a.command.join(" "));
    let opts = cairn_vm::StartOptions {
        name: a.name.clone(),
        memory: Some(cairn_vm::parse_size(&a.memory)?),
        disk: a.disk.as_ref().map(|d| ctx.cwd.join(d)),
        disk_size: Some(cairn_vm::parse_size(&a.disk_size)?),
        kernel: match (&a.kernel, &a.initrd) {
            (Some(k), Some(i)) => Some((ctx.cwd.join(k), ctx.cwd.join(i))),
            _ => None,
        },
        command,
        gateway: a.gateway,
        workspace: ctx.cwd.clone(),
    };
    let store = Store::open(ctx.store.root())?;
    let started = cairn_vm::start(&store, &opts)?;
    if a.json {
        output::json(&started)?;
    } else {
        output::text(&format!(
            "session {} runs its guest (qemu pid {}, {}); its console: {}\n\
             `cairn checkpoint save {}` saves it whole, `cairn vm stop {}` stops it\n",
            started.id,
            started.pid,
            started.accel.as_str(),
            started.console.display(),
            started.id,
            started.id
        ))?;
        if let Some(addr) = a.gateway {
            output::note(format!(
                "cairn: its programs call {}/v1: journal those calls in this session with `cairn gateway --run {} --listen {addr}`",
                cairn_vm::gateway_from_guest(addr),
                started.id
            ));
        }
    }
    Ok(Code::Ok)
}

fn ls(ctx: &Context, a: &VmLsArgs) -> anyhow::Result<Code> {
    let list = cairn_vm::list(&ctx.store)?;
    if a.json {
        output::json(&list)?;
    } else if list.is_empty() {
        output::text("no VM sessions in this store (`cairn vm start` starts one)\n")?;
    } else {
        let mut s = String::new();
        for m in &list {
            let what = m
                .name
                .clone()
                .or_else(|| m.command.clone())
                .unwrap_or_default();
            s.push_str(&format!(
                "{}  {:<8} {:>5} MiB  {}  {}\n",
                m.id,
                m.state,
                m.memory_mib,
                m.accel.as_str(),
                what
            ));
        }
        output::text(&s)?;
    }
    Ok(Code::Ok)
}

fn stop(ctx: &Context, a: &SessionJsonArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&a.id)?;
    let store = Store::open(ctx.store.root())?;
    let stopped = cairn_vm::stop(&store, &id)?;
    if a.json {
        output::json(&stopped)?;
    } else if stopped.was_running {
        output::text(&format!("stopped the guest of session {id}\n"))?;
    } else {
        output::text(&format!("the guest of session {id} was not running\n"))?;
    }
    Ok(Code::Ok)
}
