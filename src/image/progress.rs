//! Progress on stderr when it is a terminal and not `--quiet`: an image's layers by bytes read,
//! a lockfile's wheels by how many are done and the bytes downloaded.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    /// Items mode ([`Progress::items`]): the bytes [`Progress::add`] counted, beside the items
    /// the bar's position counts; None where the bar's position is the bytes.
    bytes: Option<Arc<AtomicU64>>,
}

/// Where a bar draws: standard error when it is a terminal and progress is wanted, else nowhere.
fn target(enabled: bool) -> Option<ProgressDrawTarget> {
    (enabled && std::io::stderr().is_terminal()).then(ProgressDrawTarget::stderr)
}

impl Progress {
    pub fn new(enabled: bool, total_bytes: Option<u64>, layers: usize) -> Progress {
        match target(enabled) {
            Some(t) => Progress::bytes_to(t, total_bytes, layers),
            None => Progress::none(),
        }
    }

    /// Bytes read of `total_bytes` (a spinner where the total is not known), drawn to `t`.
    fn bytes_to(t: ProgressDrawTarget, total_bytes: Option<u64>, layers: usize) -> Progress {
        let bar = match total_bytes {
            Some(total) => ProgressBar::with_draw_target(Some(total), t).with_style(
                ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
                    .expect("valid template")
                    .progress_chars("=> "),
            ),
            None => ProgressBar::with_draw_target(None, t).with_style(
                ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}").expect("valid template"),
            ),
        };
        bar.set_message(format!("{layers} layers"));
        Progress { bar: Some(bar), bytes: None }
    }

    /// `total` items (`what`: `wheels`) of which the bar counts those [`Progress::done`], and the
    /// bytes [`Progress::add`] counts beside them: `[=====>    ] 3/8 wheels, 412.5 MiB fetched`.
    /// A lockfile's wheels are fetched before any is read, so bytes are what moves first.
    pub fn items(enabled: bool, total: u64, what: &'static str) -> Progress {
        match target(enabled) {
            Some(t) => Progress::items_to(t, total, what),
            None => Progress::none(),
        }
    }

    fn items_to(t: ProgressDrawTarget, total: u64, what: &'static str) -> Progress {
        let bytes = Arc::new(AtomicU64::new(0));
        let fetched = Arc::clone(&bytes);
        let style = ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} [{{bar:30}}] {{pos}}/{{len}} {what}{{fetched}}"
        ))
        .expect("valid template")
        .with_key("fetched", move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let n = fetched.load(Ordering::Relaxed);
            if n > 0 {
                let _ = write!(w, ", {} fetched", HumanBytes(n));
            }
        })
        .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total), t).with_style(style);
        Progress { bar: Some(bar), bytes: Some(bytes) }
    }

    pub fn none() -> Progress {
        Progress { bar: None, bytes: None }
    }

    /// `n` more bytes read (or, in items mode, downloaded).
    pub fn add(&self, n: u64) {
        let Some(b) = &self.bar else { return };
        match &self.bytes {
            Some(bytes) => {
                bytes.fetch_add(n, Ordering::Relaxed);
                // Redrawn at the bar's own rate: the position did not move, the bytes did.
                b.tick();
            }
            None => b.inc(n),
        }
    }

    /// `n` more items done (items mode).
    pub fn done(&self, n: u64) {
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A terminal that keeps the last line drawn, as indicatif draws it (every draw: no rate).
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn line(&self) -> String {
            self.0.lock().unwrap().clone()
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            // Blanks pad a line over what was there before: not what the bar says.
            if !s.trim().is_empty() {
                *self.0.lock().unwrap() = s.trim_end().to_string();
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn screen() -> (Screen, ProgressDrawTarget) {
        let s = Screen::default();
        (s.clone(), ProgressDrawTarget::term_like(Box::new(s)))
    }

    /// A lockfile's bar: the bytes downloaded move it before any wheel is done, then the wheels
    /// done of the total (it showed `0 B 0 B/s` throughout: nothing added to a bytes spinner).
    #[test]
    fn a_lockfiles_bar_shows_bytes_fetched_and_wheels_done() {
        let (s, t) = screen();
        let p = Progress::items_to(t, 3, "wheels");
        p.message("fetching 3 wheels".into());
        assert!(s.line().contains("fetching 3 wheels [") && s.line().ends_with("] 0/3 wheels"), "{}", s.line());
        p.add(3 << 20);
        assert!(s.line().ends_with("] 0/3 wheels, 3.00 MiB fetched"), "{}", s.line());
        p.done(1);
        p.add(512 << 10);
        assert!(s.line().ends_with("] 1/3 wheels, 3.50 MiB fetched"), "{}", s.line());
        p.done(2);
        assert!(s.line().ends_with("] 3/3 wheels, 3.50 MiB fetched"), "{}", s.line());
    }

    /// An image's bar counts the bytes read, of a total or on a spinner.
    #[test]
    fn an_images_bar_shows_bytes_read() {
        let (s, t) = screen();
        let p = Progress::bytes_to(t, None, 2);
        p.add(2048);
        assert!(s.line().contains("2 layers 2.00 KiB"), "{}", s.line());
        let (s, t) = screen();
        let p = Progress::bytes_to(t, Some(4096), 1);
        p.add(1024);
        assert!(s.line().contains("1 layers [") && s.line().contains("] 1.00 KiB/4.00 KiB"), "{}", s.line());
    }

    #[test]
    fn nothing_is_drawn_without_a_terminal_or_when_not_wanted() {
        assert!(Progress::items(false, 3, "wheels").bar.is_none());
        assert!(Progress::new(false, Some(1), 1).bar.is_none());
    }
}
