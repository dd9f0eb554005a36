//! Issue 22, wheels: a wheel is read as pip installs it (Python's `zipfile`: `namelist()`,
//! `getinfo`, every name not ending in `/` written as a file with its bytes) or refused with
//! exit 2 naming the wheel and the member. Each zip is written by Python's zipfile, edited by
//! hand where zipfile would not write it. docs/reading.md.

use std::path::{Path, PathBuf};
use std::process::Command as Std;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use crate::util::fixture;

const WHEEL: &str = "demo-1.0-py3-none-manylinux_2_28_x86_64.whl";

/// Runs `script` (Python, with `out`, `lib` and `lib2`: paths of two CUDA libraries) to write
/// the wheel at `out`.
fn build(dir: &Path, script: &str) -> PathBuf {
    let out = dir.join(WHEEL);
    let prelude = r#"
import io, struct, sys, zipfile, zlib
out, lib, lib2 = sys.argv[1], open(sys.argv[2], 'rb').read(), open(sys.argv[3], 'rb').read()
"#;
    let o = Std::new("python3")
        .args(["-c", &format!("{prelude}{script}")])
        .arg(&out)
        .arg(fixture("libsm90a.so"))
        .arg(fixture("libmulti.so"))
        .output()
        .expect("python3");
    assert!(o.status.success(), "python3: {}", String::from_utf8_lossy(&o.stderr));
    out
}

/// What pip installs, as Python's zipfile reads it: the files (names not ending in `/`, each
/// once, its bytes those of its last entry) and which of them are ELF.
fn zipfile_view(whl: &Path) -> Value {
    let script = r#"
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = sorted(set(n for n in z.namelist() if not n.endswith('/')))
# cudalint's paths keep bytes losslessly: a literal backslash reads `\x5c` (src/layer/path.rs).
elf = sorted('/' + n.replace('\\', '\\x5c') for n in names if z.open(n).read(4) == b'\x7fELF')
print(json.dumps({'files': len(names), 'elf': elf}))
"#;
    let o = Std::new("python3").args(["-c", script]).arg(whl).output().expect("python3");
    assert!(o.status.success(), "zipfile: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn cudalint(whl: &Path) -> (Option<i32>, String, String) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", whl.to_str().unwrap(), "--quiet", "--gpu", "H100", "--format", "json"])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// cudalint's listing in zipfile_view's terms (every ELF here is a CUDA library), read through
/// the library: the CLI's reports escape a `\\` in a path.
fn listing(whl: &Path) -> Value {
    let opts = cudalint::image::ScanOptions { progress: false, ..Default::default() };
    let r = cudalint::image::scan(whl.to_str().unwrap(), &opts).unwrap_or_else(|e| panic!("{}: {e}", whl.display()));
    let mut elf: Vec<String> = r.files.iter().map(|f| f.file.path.clone()).collect();
    elf.sort();
    serde_json::json!({"files": r.stats.files, "elf": elf})
}

fn refused(whl: &Path, needles: &[&str]) -> String {
    let (code, out, err) = cudalint(whl);
    assert_eq!(code, Some(2), "{}: {out} {err}", whl.display());
    assert!(err.contains(WHEEL), "names the wheel: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
    err
}

#[test]
fn symlink_and_gitlink_modes_and_a_trailing_backslash_are_files_as_pip_writes_them() {
    let d = tempfile::tempdir().unwrap();
    let whl = build(
        d.path(),
        r#"
with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('demo/__init__.py', b'')
    z.writestr('demo/lib/', b'')
    for name, mode, data in [('demo/lib/libsym.so', 0o120777, lib), ('demo/lib/libgit.so', 0o160000, lib2),
                             ('demo/lib/libback.so\\', 0o100644, lib)]:
        i = zipfile.ZipInfo(name)
        i.external_attr = mode << 16
        i.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(i, data)
    # A repeated name: zipfile's getinfo (and pip) take the last entry.
    z.writestr('demo/lib/libdup.so', b'not an ELF')
    z.writestr('demo/lib/libdup.so', lib2)
"#,
    );
    let want = zipfile_view(&whl);
    assert_eq!(want["elf"].as_array().unwrap().len(), 4, "{want}");
    assert_eq!(listing(&whl), want);
}

#[test]
fn a_second_central_directory_is_not_read_in_place_of_zipfiles() {
    // A real wheel, with a decoy zip before it whose central directory sits where the real end
    // record's offset field points: zipfile reads the directory that ends at the end record
    // (concat = the decoy's length), an offset-trusting reader the decoy's.
    let d = tempfile::tempdir().unwrap();
    let whl = build(
        d.path(),
        r#"
def zipped(name, data):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
    return b.getvalue()
real = zipped('demo/libreal.so', lib)
fake = zipped('demo/libfake.so', b'benign')
o = struct.unpack('<I', real[-6:-2])[0]
fcd = struct.unpack('<I', fake[-6:-2])[0]
fake_cd = fake[fcd:-22]
assert fcd <= o
prefix = fake[:fcd] + b'\0' * (o - fcd) + fake_cd
open(out, 'wb').write(prefix + real)
"#,
    );
    let want = zipfile_view(&whl);
    assert_eq!(want["elf"], serde_json::json!(["/demo/libreal.so"]));
    // The zip crate reads the decoy's directory (its offset field's): the two readings differ,
    // and the wheel is refused rather than judged by either.
    refused(&whl, &["central directories disagree"]);
}

#[test]
fn members_sharing_one_inflated_gigabyte_are_refused_not_inflated() {
    // 600 central directory entries, each its own name, all pointing at one local header whose
    // deflated data inflates to 1 GiB: ~1 MB of wheel, 600 GiB to inflate.
    let d = tempfile::tempdir().unwrap();
    let whl = build(
        d.path(),
        r#"
c = zlib.compressobj(9, zlib.DEFLATED, -15)
chunk, size, crc, parts = b'\0' * (1 << 20), 1 << 30, 0, []
for _ in range(1024):
    parts.append(c.compress(chunk))
    crc = zlib.crc32(chunk, crc)
parts.append(c.flush())
data = b''.join(parts)
name = b'demo/big.bin'
local = struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 8, 0, 0, crc, len(data), size, len(name), 0) + name + data
cd = b''
for i in range(600):
    n = b'demo/big%03d.bin' % i
    cd += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 8, 0, 0, crc, len(data), size, len(n), 0, 0, 0, 0, 0o644 << 16, 0) + n
end = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 600, 600, len(cd), len(local), 0)
open(out, 'wb').write(local + cd + end)
"#,
    );
    assert!(std::fs::metadata(&whl).unwrap().len() < 2 << 20);
    refused(&whl, &["share bytes", "demo/big"]);
}

#[test]
fn more_inflated_bytes_than_the_bound_are_refused_before_inflating() {
    // Five members whose central directory entries claim ~4 GiB each (zip64 sizes).
    let d = tempfile::tempdir().unwrap();
    let whl = build(
        d.path(),
        r#"
b = io.BytesIO()
with zipfile.ZipFile(b, 'w', zipfile.ZIP_STORED) as z:
    for i in range(5):
        z.writestr('demo/part%d.bin' % i, b'x')
raw = bytearray(b.getvalue())
at = raw.find(b'PK\x01\x02')
while at >= 0:
    raw[at + 24:at + 28] = struct.pack('<I', 0xFFFFFFF0)
    at = raw.find(b'PK\x01\x02', at + 4)
open(out, 'wb').write(raw)
"#,
    );
    refused(&whl, &["inflate to more than", "demo/part"]);
}

#[test]
fn an_lzma_member_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let whl = build(
        d.path(),
        r#"
with zipfile.ZipFile(out, 'w') as z:
    z.writestr('demo/__init__.py', b'')
    z.writestr('demo/lib/libsm90a.so', lib, compress_type=zipfile.ZIP_LZMA)
"#,
    );
    assert_eq!(zipfile_view(&whl)["elf"], serde_json::json!(["/demo/lib/libsm90a.so"]), "zipfile reads it");
    refused(&whl, &["demo/lib/libsm90a.so", "LZMA"]);
}
