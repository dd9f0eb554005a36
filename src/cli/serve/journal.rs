//! The durable side of the queue (`--state-dir`): every job the webhook accepts is appended to
//! `journal.jsonl` and synced before the registry is answered 200; a job that ends (scanned, not
//! an image, or given up after its retries) is marked done. On start the jobs not done are
//! queued again, so a push answered 200 survives a crash, a SIGKILL or a rollout. A job given
//! up on is also written to `failed.jsonl` (and counted in /metrics).
//!
//! One line per record: `{"op":"add","job":{...}}` or `{"op":"done","key":"…","ok":bool}`. A
//! torn last line (the process killed mid-write) is skipped. The file is rewritten with only the
//! jobs not done when it opens, and whenever the done records outnumber the pending ones.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::event::Job;

/// The longest record read back (a job is a few hundred bytes): longer is not cudalint's.
const MAX_LINE: u64 = 64 << 10;
/// Records appended between two rewrites, at least.
const COMPACT_AFTER: usize = 4096;

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Record {
    Add { job: Job },
    Done { key: String, ok: bool },
}

pub struct Journal {
    dir: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    file: File,
    /// Jobs accepted and not done, by key, in the order accepted.
    pending: BTreeMap<String, (u64, Job)>,
    next: u64,
    appended: usize,
}

impl Journal {
    /// Opens (creating) the journal in `dir` and returns the jobs a previous run accepted and did
    /// not finish, in the order it accepted them; with `host` (`--registry-url`), each as a job
    /// of that registry (only it is contacted, whatever an older run's journal names).
    pub fn open(dir: &Path, host: Option<&str>) -> anyhow::Result<(Journal, Vec<Job>)> {
        use anyhow::Context;
        std::fs::create_dir_all(dir).with_context(|| format!("--state-dir {}", dir.display()))?;
        private(dir)?;
        let path = dir.join("journal.jsonl");
        let mut pending: BTreeMap<String, (u64, Job)> = BTreeMap::new();
        let mut next = 0;
        let mut torn = 0;
        // A journal that exists but cannot be read would drop what it holds: refused, not
        // taken as empty.
        let opened = match File::open(&path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| path.display().to_string()),
        };
        if let Some(f) = opened {
            let mut r = BufReader::new(f);
            loop {
                let mut line = Vec::new();
                let n =
                    (&mut r).take(MAX_LINE).read_until(b'\n', &mut line).with_context(|| path.display().to_string())?;
                if n == 0 {
                    break;
                }
                match serde_json::from_slice::<Record>(&line) {
                    Ok(Record::Add { job }) => {
                        pending.entry(job.spec()).or_insert((next, job));
                        next += 1;
                    }
                    Ok(Record::Done { key, .. }) => {
                        pending.remove(&key);
                    }
                    Err(_) => torn += 1,
                }
            }
        }
        if torn > 0 {
            eprintln!("cudalint serve: note: {}: {torn} unreadable record(s) skipped", path.display());
        }
        // Keys change with the host: records were matched under the host they were written with.
        let pending: BTreeMap<String, (u64, Job)> = pending
            .into_values()
            .map(|(n, mut j)| {
                if let Some(h) = host {
                    j.host = h.to_string();
                }
                (j.spec(), (n, j))
            })
            .collect();
        let replay: Vec<Job> = in_order(&pending).into_iter().cloned().collect();
        let file = rewrite(dir, &replay)?;
        let journal = Journal { dir: dir.to_path_buf(), inner: Mutex::new(Inner { file, pending, next, appended: 0 }) };
        Ok((journal, replay))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `jobs` as accepted, synced to disk: only then may the webhook answer 200.
    pub fn add(&self, jobs: &[Job]) -> std::io::Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut g = self.lock();
        g.file.write_all(&add_records(jobs))?;
        g.file.sync_data()?;
        for job in jobs {
            let n = g.next;
            g.next += 1;
            g.pending.entry(job.spec()).or_insert((n, job.clone()));
        }
        g.appended += jobs.len();
        Ok(())
    }

    /// Marks the job `key` done (`ok`: scanned or settled; else given up on). Not synced: a
    /// done record lost to a crash costs one scan again, never a lost one.
    pub fn done(&self, key: &str, ok: bool) {
        let mut g = self.lock();
        if g.pending.remove(key).is_none() {
            return;
        }
        let mut line = serde_json::to_vec(&Record::Done { key: key.to_string(), ok }).expect("json");
        line.push(b'\n');
        if let Err(e) = g.file.write_all(&line) {
            eprintln!("cudalint serve: journal: {e} (the job may be scanned again after a restart)");
        }
        g.appended += 1;
        if g.appended > COMPACT_AFTER.max(2 * g.pending.len()) {
            let pending: Vec<Job> = in_order(&g.pending).into_iter().cloned().collect();
            match rewrite(&self.dir, &pending) {
                Ok(f) => {
                    g.file = f;
                    g.appended = 0;
                }
                Err(e) => eprintln!("cudalint serve: journal: rewriting it: {e:#}"),
            }
        }
    }

    /// Jobs accepted and not done.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Records a job given up on in `failed.jsonl`, for people and alerts.
    pub fn failed(&self, job: &Job, attempts: u32, error: &str) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut line = serde_json::to_vec(&serde_json::json!({
            "image": job.spec(), "tag": job.tag, "attempts": attempts, "error": error, "time": now,
        }))
        .expect("json");
        line.push(b'\n');
        let path = self.dir.join("failed.jsonl");
        let written = OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(&line));
        if let Err(e) = written {
            eprintln!("cudalint serve: {}: {e}", path.display());
        }
    }
}

/// The state directory is the process's own: one another user owns, or anyone may write, could
/// hold a planted journal (scans the registry never asked for). Root's, writable by the group
/// (a Kubernetes volume with `fsGroup`), is the pod's own.
fn private(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if (m.uid() != me && m.uid() != 0) || m.mode() & 0o002 != 0 {
        anyhow::bail!(
            "--state-dir {}: owned by another user or writable by anyone; give a directory only this user can write",
            dir.display()
        );
    }
    Ok(())
}

/// The pending jobs in the order they were accepted.
fn in_order(pending: &BTreeMap<String, (u64, Job)>) -> Vec<&Job> {
    let mut jobs: Vec<&(u64, Job)> = pending.values().collect();
    jobs.sort_by_key(|(n, _)| *n);
    jobs.into_iter().map(|(_, j)| j).collect()
}

/// The `add` records of `jobs`, a line each.
fn add_records(jobs: &[Job]) -> Vec<u8> {
    let mut buf = Vec::new();
    for job in jobs {
        serde_json::to_writer(&mut buf, &Record::Add { job: job.clone() }).expect("a job serialises");
        buf.push(b'\n');
    }
    buf
}

/// Writes `pending` (in order) to a new journal, synced, and renames it over the old one; returns
/// it opened for appending.
fn rewrite(dir: &Path, pending: &[Job]) -> anyhow::Result<File> {
    use anyhow::Context;
    let path = dir.join("journal.jsonl");
    let tmp = dir.join(".journal.jsonl.new");
    let mut f = File::create(&tmp).with_context(|| tmp.display().to_string())?;
    f.write_all(&add_records(pending))?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path).with_context(|| path.display().to_string())?;
    File::open(dir)?.sync_all()?;
    OpenOptions::new().append(true).open(&path).with_context(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u8) -> Job {
        Job {
            host: "r:5000".into(),
            repository: "a".into(),
            digest: format!("sha256:{n:064x}"),
            tag: None,
            attempts: 0,
        }
    }

    #[test]
    fn what_is_not_done_is_replayed_in_order_and_a_torn_line_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let (j, replay) = Journal::open(d.path(), None).unwrap();
        assert!(replay.is_empty());
        j.add(&[job(1), job(2)]).unwrap();
        j.add(&[job(3)]).unwrap();
        j.done(&job(2).spec(), true);
        drop(j);
        // Killed mid-write: half a record at the end.
        let mut f = OpenOptions::new().append(true).open(d.path().join("journal.jsonl")).unwrap();
        f.write_all(b"{\"op\":\"add\",\"jo").unwrap();
        let (j, replay) = Journal::open(d.path(), None).unwrap();
        assert_eq!(replay, [job(1), job(3)]);
        assert_eq!(j.pending(), 2);
        // Rewritten on open: only the pending records remain.
        let text = std::fs::read_to_string(d.path().join("journal.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn a_journal_that_cannot_be_opened_is_an_error_not_an_empty_queue() {
        let d = tempfile::tempdir().unwrap();
        // A link to itself: open fails (ELOOP) whoever runs the test, root included.
        std::os::unix::fs::symlink("journal.jsonl", d.path().join("journal.jsonl")).unwrap();
        let e = Journal::open(d.path(), None).err().expect("refused");
        assert!(format!("{e:#}").contains("journal.jsonl"), "{e:#}");
    }

    #[test]
    fn a_state_dir_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Journal::open(d.path(), None).is_err());
    }
}
