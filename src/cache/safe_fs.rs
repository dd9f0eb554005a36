//! File operations relative to a directory descriptor, never following a link at the last
//! step and never blocking on a FIFO: the layer cache's `layers/` and key file, and
//! [`write_new_file`] for any directory others may write (`--output-dir`).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

pub struct DirFd(OwnedFd);

fn plain_name(name: &str) -> io::Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not a plain file name")));
    }
    Ok(name)
}

fn refused(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Why an open with `O_NOFOLLOW` failed, in words (ELOOP: the name is a symlink).
fn explain(e: rustix::io::Errno) -> io::Error {
    if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
        refused("a symbolic link or not a directory: refused, not followed")
    } else {
        e.into()
    }
}

fn kind_of(fd: &OwnedFd) -> io::Result<FileType> {
    Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode))
}

fn what(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

impl DirFd {
    /// `path` as a directory (followed: the caller named it).
    pub fn open(path: &Path) -> io::Result<DirFd> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(DirFd(fd))
    }

    /// The subdirectory `name`, never through a link; made (0700) if `create`.
    pub fn subdir(&self, name: &str, create: bool) -> io::Result<DirFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::empty()) {
            Ok(fd) => Ok(DirFd(fd)),
            Err(rustix::io::Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&self.0, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rustix::fs::openat(&self.0, name, flags, Mode::empty()).map(DirFd).map_err(explain)
            }
            Err(e) => Err(explain(e)),
        }
    }

    /// The whole of the regular file `name`, at most `limit` bytes (a larger one is an
    /// error); a link, FIFO, device or directory is refused without blocking.
    pub fn read_regular(&self, name: &str, limit: u64) -> io::Result<Vec<u8>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::empty()).map_err(explain)?;
        let t = kind_of(&fd)?;
        if t != FileType::RegularFile {
            return Err(refused(what(t)));
        }
        let mut buf = Vec::new();
        File::from(fd).take(limit + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > limit {
            return Err(refused("larger than an entry may be"));
        }
        Ok(buf)
    }

    /// The regular file `name`, opened to read; a link, FIFO, device or directory is refused
    /// without blocking.
    pub fn open_regular(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::empty()).map_err(explain)?;
        let t = kind_of(&fd)?;
        if t != FileType::RegularFile {
            return Err(refused(what(t)));
        }
        Ok(File::from(fd))
    }

    /// A new file under a fresh temporary name (created exclusively, `O_NOFOLLOW`, mode `mode`
    /// less the umask): its name and the file, open to read and write.
    pub fn create_temp(&self, mode: u32) -> io::Result<(String, File)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        loop {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let tmp = format!(".tmp-{}-{}-{nanos:x}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
            match rustix::fs::openat(&self.0, tmp.as_str(), flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => return Ok((tmp, File::from(fd))),
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Renames `from` over `to`, both in this directory (whatever `to` was is replaced, a link
    /// as a link).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.0, plain_name(from)?, &self.0, plain_name(to)?)?)
    }

    /// A lock file `name`, opened or made, a regular file only.
    pub fn open_lock(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::from_raw_mode(0o600)).map_err(explain)?;
        let t = kind_of(&fd)?;
        if t != FileType::RegularFile {
            return Err(refused(what(t)));
        }
        Ok(File::from(fd))
    }

    /// Writes `name` anew: a temporary file made exclusively beside it (mode `mode`, less
    /// the umask), synced if `sync`, renamed over `name`.
    pub fn replace(&self, name: &str, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
        let name = plain_name(name)?;
        let (tmp, mut f) = self.create_temp(mode)?;
        let written = f.write_all(bytes).and_then(|_| if sync { f.sync_all() } else { Ok(()) });
        let renamed = written.and_then(|_| Ok(rustix::fs::renameat(&self.0, tmp.as_str(), &self.0, name)?));
        if renamed.is_err() {
            let _ = self.remove(&tmp);
        }
        renamed
    }

    /// Removes the name `name` (a link is removed as a link).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.0, plain_name(name)?, AtFlags::empty())?)
    }

    /// The names in the directory (not `.` and `..`; names that are not UTF-8 are left out:
    /// cudalint never makes one).
    pub fn names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in rustix::fs::Dir::read_from(&self.0)? {
            let e = e?;
            let name = OsString::from_vec(e.file_name().to_bytes().to_vec());
            if let Ok(n) = name.into_string()
                && n != "."
                && n != ".."
            {
                out.push(n);
            }
        }
        Ok(out)
    }
}

/// Why someone else could change a file's bytes: group or others may write it, or a user other
/// than this one or root owns it; None when only they can (the key file, a cached wheel).
pub fn writable_by_others(m: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if m.mode() & 0o022 != 0 {
        return Some("group or others may write it: refused (chmod 600)");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    (m.uid() != me && m.uid() != 0).then_some("owned by another user: refused")
}

/// `path` opened to read (followed: the caller named it), a regular file only: a FIFO, device,
/// directory or socket is refused without blocking, the error saying which (`a FIFO`).
pub fn open_regular_path(path: &Path) -> io::Result<File> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
    let t = kind_of(&fd)?;
    if t != FileType::RegularFile {
        return Err(refused(what(t)));
    }
    Ok(File::from(fd))
}

/// The key file's bytes (at most 4 KiB). It may be a link (a Kubernetes Secret mount is
/// one); it must be a regular file that neither group nor others may write, owned by this
/// user or root.
pub fn read_key_file(p: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(p)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(refused("not a regular file"));
    }
    if let Some(why) = writable_by_others(&m) {
        return Err(refused(why));
    }
    let mut buf = Vec::new();
    f.take(4097).read_to_end(&mut buf)?;
    if buf.len() > 4096 {
        return Err(refused("larger than 4 KiB: not a key"));
    }
    Ok(buf)
}

/// Makes the key file with a fresh random secret (64 hex digits), 0600 in a 0700 directory,
/// atomically: written whole under a temporary name, then linked to its name, so a process
/// that races this one reads one whole key or the other, and both keep the first.
pub fn create_key_file(p: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = p.parent().ok_or_else(|| refused("no directory"))?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let mut secret = [0u8; 32];
    File::open("/dev/urandom")?.read_exact(&mut secret)?;
    let tmp = dir.join(format!(".cache.key.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    let written = f.write_all(format!("{}\n", hex::encode(secret)).as_bytes()).and_then(|_| f.sync_all());
    let linked = written.and_then(|_| match std::fs::hard_link(&tmp, p) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    });
    let _ = std::fs::remove_file(&tmp);
    linked
}

/// Writes `bytes` to `dir/name` (one plain file name) without following anything planted there:
/// the bytes go to a new temporary file (created exclusively, `O_NOFOLLOW`) in `dir`, which is
/// then renamed over `name`, replacing whatever was there (a symlink is replaced, not followed;
/// a directory is an error). For directories others may write to (a shared `--output-dir`).
/// `dir` itself is the caller's to choose, and is followed if a link.
pub fn write_new_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    DirFd::open(dir)?.replace(name, bytes, 0o666, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_new_file_replaces_a_planted_link_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("report.json")).unwrap();
        write_new_file(dir.path(), "report.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read(dir.path().join("report.json")).unwrap(), b"{}");
        // Written again: replaced whole, no temporary file left behind.
        write_new_file(dir.path(), "report.json", b"[]").unwrap();
        assert_eq!(std::fs::read(dir.path().join("report.json")).unwrap(), b"[]");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        for bad in ["", ".", "..", "a/b", "../x"] {
            let e = write_new_file(dir.path(), bad, b"x").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(write_new_file(dir.path(), "sub", b"x").is_err(), "a directory is not replaced");
    }

    #[test]
    fn the_key_file_is_made_private_once_and_refused_if_others_may_write_it() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let p = home.path().join("cudalint/cache.key");
        create_key_file(&p).unwrap();
        let first = read_key_file(&p).unwrap();
        assert_eq!(first.trim_ascii().len(), 64);
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(p.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        // Made again (a racing process): the first key stays.
        create_key_file(&p).unwrap();
        assert_eq!(read_key_file(&p).unwrap(), first);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(read_key_file(&p).unwrap_err().to_string().contains("may write"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A Secret mount is a link: followed.
        let link = home.path().join("mounted.key");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(read_key_file(&link).unwrap(), first);
    }
}
