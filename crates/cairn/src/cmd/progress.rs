//! Progress bars for long captures, restores and prunes, drawn on stderr
//! (hidden when stderr is not a terminal, and with `--json`).

use std::sync::Mutex;

use cairn_objects::{Phase, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws one bar per phase.
pub struct Bars {
    visible: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new(quiet: bool) -> Self {
        Bars {
            visible: !quiet,
            bar: Mutex::new(None),
        }
    }
}

fn name(phase: Phase) -> &'static str {
    match phase {
        Phase::Walk => "walking",
        Phase::Hash => "hashing",
        Phase::Store => "storing",
        Phase::Stage => "staging",
        Phase::Apply => "applying",
        Phase::Mark => "marking",
        Phase::Sweep => "sweeping",
        _ => "working",
    }
}

impl Progress for Bars {
    fn begin(&self, phase: Phase, total: Option<u64>) {
        if !self.visible {
            return;
        }
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let style = match total {
            Some(_) => ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} {msg}"),
            None => ProgressStyle::with_template("{prefix:>9} {spinner} {pos} {msg}"),
        };
        if let Ok(style) = style {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name(phase));
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(old) = slot.replace(bar) {
                old.finish_and_clear();
            }
        }
    }

    fn advance(&self, _phase: Phase, items: u64, _bytes: u64) {
        if let Ok(slot) = self.bar.lock() {
            if let Some(bar) = slot.as_ref() {
                bar.inc(items);
            }
        }
    }

    fn end(&self, _phase: Phase) {
        if let Ok(mut slot) = self.bar.lock() {
            if let Some(bar) = slot.take() {
                bar.finish_and_clear();
            }
        }
    }
}
