//! Running something that may crash or hang (a kernel launched with null pointers, a driver fed
//! a module it chokes on) in a child process: its standard output is collected line by line, it
//! is killed when it stays silent too long, and how it ended is reported, so a fault or a hang
//! never takes the scan or the GPU context down.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct ChildOutcome {
    /// Lines the child printed before it ended.
    pub lines: Vec<String>,
    /// None when it was killed for its silence.
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    /// The end of what it wrote to standard error (for diagnostics).
    pub stderr: String,
}

impl ChildOutcome {
    /// Ended on a signal (a crash), with the signal number.
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.and_then(|s| s.signal())
    }

    /// How it ended, in words.
    pub fn ending(&self) -> String {
        match (self.timed_out, self.signal(), self.status) {
            (true, _, _) => "killed after its time ran out".into(),
            (_, Some(s), _) => format!("died on signal {s}{}", if s == 11 { " (segmentation fault)" } else { "" }),
            (_, _, Some(st)) if !st.success() => format!("exited with {st}"),
            _ => "ended".into(),
        }
    }
}

/// Starts `cmd`, writes `input` to its standard input, and kills it once it has printed nothing
/// for `quiet` (each line it prints restarts the clock: one slow step, not the whole run).
pub fn run(cmd: &mut Command, input: &[u8], quiet: Duration) -> std::io::Result<ChildOutcome> {
    let input = input.to_vec();
    run_with(cmd, move |w| w.write_all(&input), quiet)
}

/// As `run`, with the child's standard input written by `feed` on a thread of its own.
pub fn run_with(
    cmd: &mut Command,
    feed: impl FnOnce(&mut ChildStdin) -> std::io::Result<()> + Send + 'static,
    quiet: Duration,
) -> std::io::Result<ChildOutcome> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || {
        // A child that dies early closes the pipe: not an error here.
        let _ = feed(&mut stdin);
    });
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = stderr.read_to_end(&mut all);
        let s = String::from_utf8_lossy(&all);
        let mut start = s.len().saturating_sub(2000);
        while !s.is_char_boundary(start) {
            start += 1;
        }
        s[start..].trim().to_string()
    });
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let mut deadline = Instant::now() + quiet;
    let mut lines = Vec::new();
    let (status, timed_out) = loop {
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
            deadline = Instant::now() + quiet;
        }
        if let Some(s) = child.try_wait()? {
            break (Some(s), false);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let _ = reader.join();
    lines.extend(rx.try_iter());
    let stderr = errors.join().unwrap_or_default();
    Ok(ChildOutcome { lines, status, timed_out, stderr })
}
