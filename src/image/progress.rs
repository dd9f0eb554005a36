//! Progress on stderr (layers and bytes) when it is a terminal and not `--quiet`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(enabled: bool, total_bytes: Option<u64>, layers: usize) -> Progress {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = match total_bytes {
            Some(t) => ProgressBar::new(t).with_style(
                ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
                    .expect("valid template")
                    .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}").expect("valid template"),
            ),
        };
        bar.set_message(format!("{layers} layers"));
        Progress { bar: Some(bar) }
    }

    pub fn none() -> Progress {
        Progress { bar: None }
    }

    pub fn add(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    pub fn message(&self, m: String) {
        if let Some(b) = &self.bar {
            b.set_message(m);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
