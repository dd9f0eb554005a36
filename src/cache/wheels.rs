//! The wheel cache (`<cache>/wheels/<sha256>.whl`): wheels a lockfile names, content-addressed by
//! their sha256, so a second run downloads nothing.
//!
//! The directory may be written by others (a shared CI cache), so nothing in it is believed
//! unchecked, as for the layer cache:
//! - a wheel is used only when the bytes read through the descriptor it was opened with hash to
//!   the sha256 the lock lists, and those same bytes (that descriptor) are what is analysed:
//!   replacing the file after the check changes nothing the scan reads; an entry another user
//!   owns, or that group or others may write (who could rewrite it in place), is not used;
//! - nothing beside a wheel decides anything (the name a requirements line's hash stands for is
//!   read from the verified wheel's own `WHEEL` tags, never from a sidecar);
//! - `wheels/` and its entries are reached through a directory descriptor and opened with
//!   `O_NOFOLLOW | O_NONBLOCK`, regular files only: a link (as `wheels/` or as an entry) is
//!   refused, never followed or written through; a FIFO or device is refused without blocking;
//! - a download goes to a new file created exclusively beside its name and is renamed into place
//!   only once its size and sha256 match.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::safe_fs::DirFd;

/// Where wheels are kept for a run: `<cache>/wheels`, or a private temporary directory.
pub struct WheelCache {
    dir: DirFd,
    /// For messages.
    shown: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

/// A wheel being downloaded: written to a temporary name in the cache, then kept or removed.
pub struct Download<'a> {
    cache: &'a WheelCache,
    name: Option<String>,
    pub file: File,
}

impl Drop for Download<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.name.take() {
            let _ = self.cache.dir.remove(&n);
        }
    }
}

impl Write for Download<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.file.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The sha256 (hex) and length of what `r` reads.
pub fn sha256_of(r: &mut impl Read) -> io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let n = io::copy(r, &mut h)?;
    Ok((hex::encode(h.finalize()), n))
}

fn entry(sha256: &str) -> String {
    format!("{sha256}.whl")
}

impl WheelCache {
    /// `<dir>/wheels`, made if missing; a `wheels` that is a link (or not a directory) is an
    /// error, never followed.
    pub fn open(dir: &Path) -> io::Result<WheelCache> {
        std::fs::create_dir_all(dir)?;
        let wheels = DirFd::open(dir)?.subdir("wheels", true)?;
        Ok(WheelCache { dir: wheels, shown: dir.join("wheels"), _temp: None })
    }

    /// A private directory removed at the end (`--no-cache`, or a cache that cannot be used).
    pub fn temporary() -> io::Result<WheelCache> {
        let t = tempfile::tempdir()?;
        Ok(WheelCache { dir: DirFd::open(t.path())?, shown: t.path().to_path_buf(), _temp: Some(t) })
    }

    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// The cached wheel with this sha256, hashed through the descriptor it is returned on
    /// (rewound) with its length: None when there is none, or what is there is not a regular
    /// file or not those bytes (a later download replaces it).
    pub fn get(&self, sha256: &str) -> Option<(File, u64)> {
        let name = entry(sha256);
        let mut f = self.dir.open_regular(&name).ok()?;
        // The descriptor pins the inode, not its bytes: an entry that someone else owns, or that
        // group or others may write, could be rewritten in place between the hash and the
        // analysis. Passed over (a download replaces it), as a key file others may write is.
        if !private(&f) {
            return None;
        }
        let (got, n) = sha256_of(&mut f).ok()?;
        if got != sha256 {
            return None;
        }
        after_hash_hook(&self.shown.join(&name));
        f.rewind().ok()?;
        Some((f, n))
    }

    /// A new file to download into.
    pub fn create(&self) -> io::Result<Download<'_>> {
        let (name, file) = self.dir.create_temp(0o600)?;
        Ok(Download { cache: self, name: Some(name), file })
    }

    /// Keeps a download whose bytes hash to `sha256` under its name (replacing whatever is
    /// there, a link as a link); its file, rewound, is the one the caller goes on reading.
    pub fn keep(&self, mut d: Download<'_>, sha256: &str) -> io::Result<File> {
        let tmp = d.name.take().expect("a download is kept once");
        if let Err(e) = self.dir.rename(&tmp, &entry(sha256)) {
            let _ = self.dir.remove(&tmp);
            return Err(e);
        }
        d.file.rewind()?;
        d.file.try_clone()
    }

    /// Removes every name in `<dir>/wheels` (links as links; a `wheels` that is a link is
    /// refused): how many wheels (`.whl`) went.
    pub fn clean(dir: &Path) -> io::Result<u64> {
        let wheels = match DirFd::open(dir).and_then(|d| d.subdir("wheels", false)) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut n = 0;
        for name in wheels.names()? {
            if wheels.remove(&name).is_ok() && name.ends_with(".whl") {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Whether only this user (or root) can change the file's bytes.
fn private(f: &File) -> bool {
    f.metadata().is_ok_and(|m| super::safe_fs::writable_by_others(&m).is_none())
}

/// Test builds only: `CUDALINT_TEST_AFTER_HASH`, a shell command run (with the entry's path as
/// `$1`) after a cached wheel hashed right and before it is read as a wheel, so a test can
/// replace the file exactly there instead of racing the scan.
#[cfg(debug_assertions)]
fn after_hash_hook(path: &Path) {
    if let Some(cmd) = std::env::var_os("CUDALINT_TEST_AFTER_HASH") {
        let _ = std::process::Command::new("sh").arg("-c").arg(cmd).arg("sh").arg(path).status();
    }
}

#[cfg(not(debug_assertions))]
fn after_hash_hook(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_with_the_right_bytes_are_cached_wheels() {
        let dir = tempfile::tempdir().unwrap();
        let c = WheelCache::open(dir.path()).unwrap();
        let bytes = b"PK not really a wheel";
        let sha = hex::encode(Sha256::digest(bytes));
        assert!(c.get(&sha).is_none());
        let mut d = c.create().unwrap();
        d.write_all(bytes).unwrap();
        let mut f = c.keep(d, &sha).unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back, bytes);
        let (mut f, n) = c.get(&sha).unwrap();
        assert_eq!(n, bytes.len() as u64);
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back, bytes);
        // Writable by others: not used (they could rewrite it between the hash and the read).
        use std::os::unix::fs::PermissionsExt;
        let p = dir.path().join("wheels").join(entry(&sha));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(c.get(&sha).is_none());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(c.get(&sha).is_some());
        // Other bytes under the name: not the wheel.
        std::fs::write(dir.path().join("wheels").join(entry(&sha)), b"other").unwrap();
        assert!(c.get(&sha).is_none());
        // A download dropped without being kept leaves nothing behind.
        drop(c.create().unwrap());
        let names = std::fs::read_dir(dir.path().join("wheels")).unwrap().count();
        assert_eq!(names, 1);
        assert_eq!(WheelCache::clean(dir.path()).unwrap(), 1);
        assert_eq!(std::fs::read_dir(dir.path().join("wheels")).unwrap().count(), 0);
    }
}
