//! The built-in run-time-compiler table (rules/compilers/runtime-compilers.toml, read through
//! `cudalint::cuda::toolchains::table()` as the linter reads it) checked against NVIDIA's own tools,
//! run for real, and cudalint's static version reading checked against the tools' own answers.
//!
//! The table decides whether an image's ptxas, NVRTC or nvJitLink can build code for a GPU; a row
//! that drifts from the real tool turns into wrong verdicts with no other test noticing, and a
//! version read wrong from a file's bytes picks the wrong row. So, for each real tool this suite can
//! fetch (scripts/fetch-cuda-tools.sh: ptxas 11.8, 12.9, 13.5 and nvcc 13.5; the pinned torch 2.8.0
//! closure of tests/it/stock_stack.rs: Triton 3.4.0's bundled ptxas, NVRTC and nvJitLink 12.8):
//!
//! - ptxas: `--version`'s release and full version; the `sm_*` values `--help` allows for
//!   `--gpu-name` against the row's `targets` (as sets); the newest PTX ISA it reads (the version it
//!   names when refusing `.version 99.9`, and that it then assembles) against `max_ptx_isa`;
//!   cudalint's static version of the file against `--version`.
//! - Triton: the release of the ptxas the wheel bundles against the `triton_release` row.
//! - NVRTC (`libnvrtc.so.12` and `libnvrtc.alt.so.12`, loaded with python3's ctypes):
//!   `nvrtcVersion` and `nvrtcGetSupportedArchs` against the row's `archs`, the `.version` of the
//!   PTX it writes against `ptx_isa`, the version in that PTX's header against cudalint's.
//! - nvJitLink: `nvJitLinkVersion` and the newest `__nvJitLinkCreate_X_Y` it exports (`nm -D`)
//!   against cudalint's static version, whose full version must equal the wheel's.
//! - nvcc: `--version` against cudalint's static version, `--list-gpu-code` within the ptxas row.
//!
//! Nothing expected is written here but the table: every other value comes from the tools. The
//! last test runs the same checks on a copy of the table with every row drifted or removed, so a
//! check that could never fail would show.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use cudalint::cuda::CudaVersion;
use cudalint::cuda::toolchains::{Table, table};
use serde_json::Value;

use crate::util::root;

/// Fails (never skips) when a tool is missing, naming the Debian package that has it.
fn need(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is needed by this test and is not installed: run scripts/install-test-deps.sh \
                 {name}:{package} (Debian package {package})"
            )
        })
}

/// The directory scripts/fetch-cuda-tools.sh fills (NVIDIA's compilers from PyPI).
pub(crate) fn cuda_tools() -> PathBuf {
    let out = Std::new(root().join("scripts/fetch-cuda-tools.sh")).output().expect("run scripts/fetch-cuda-tools.sh");
    assert!(
        out.status.success(),
        "scripts/fetch-cuda-tools.sh failed (PyPI must be reachable, and python3 with pip installed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The wheel of `project` pinned in the torch 2.8.0 closure (tests/stacks/torch-2.8.0-cu128.txt,
/// which tests/it/stock_stack.rs fetches into its cache), and the pinned version.
fn wheel(project: &str) -> (PathBuf, String) {
    let pins = root().join("tests/stacks/torch-2.8.0-cu128.txt");
    let text = std::fs::read_to_string(&pins).unwrap_or_else(|e| panic!("{}: {e}", pins.display()));
    let version = text
        .lines()
        .find_map(|l| l.split_whitespace().next()?.strip_prefix(&format!("{project}==")))
        .unwrap_or_else(|| panic!("{} pins no {project}", pins.display()))
        .to_string();
    crate::stock_stack::torch_image();
    let dir = crate::stock_stack::cache().join("wheels");
    let prefix = format!("{}-{version}-", project.replace('-', "_"));
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name().unwrap().to_string_lossy().starts_with(&prefix) && p.extension().is_some_and(|e| e == "whl")
        })
        .collect();
    assert_eq!(found.len(), 1, "exactly one {prefix}*.whl in {}: {found:?}", dir.display());
    (found.into_iter().next().unwrap(), version)
}

/// Extracts `members` of `whl` into `dir` under their own file names (executable), returning their paths.
fn extract(whl: &Path, members: &[&str], dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    members
        .iter()
        .map(|m| {
            let mut entry = zip.by_name(m).unwrap_or_else(|e| panic!("{}: no {m}: {e}", whl.display()));
            let path = dir.join(Path::new(m).file_name().unwrap());
            let mut f = std::fs::File::create(&path).unwrap();
            std::io::copy(&mut entry, &mut f).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        })
        .collect()
}

fn wheel_has(whl: &Path, member: &str) -> bool {
    zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap().file_names().any(|n| n == member)
}

fn run(cmd: &mut Std) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn stdout_of(cmd: &mut Std) -> String {
    let out = run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What cudalint reads of `file` without running it: (kind, version, source).
fn static_toolchain(file: &Path) -> (String, String, String) {
    let out = Command::cargo_bin("cudalint").unwrap().args(["inspect", "--format", "json"]).arg(file).output().unwrap();
    assert!(out.status.success(), "cudalint inspect {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = r["files"].as_array().expect("files");
    assert_eq!(files.len(), 1, "cudalint inspect {}: one file expected: {r}", file.display());
    let t = &files[0]["toolchain"];
    assert!(t.is_object(), "cudalint did not recognise {} as a run-time compiler: {}", file.display(), files[0]);
    let field =
        |k: &str| t[k].as_str().unwrap_or_else(|| panic!("toolchain.{k} of {}: {t}", file.display())).to_string();
    (field("kind"), field("version"), field("source"))
}

/// The release and full version of the last-but-one line of `--version`:
/// `Cuda compilation tools, release 12.8, V12.8.93`.
fn banner_version(tool: &Path) -> (CudaVersion, String) {
    let text = stdout_of(Std::new(tool).arg("--version"));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "{} --version: {text}", tool.display());
    let line = lines[lines.len() - 2];
    let rest = line
        .strip_prefix("Cuda compilation tools, release ")
        .unwrap_or_else(|| panic!("{} --version: unexpected line {line:?}", tool.display()));
    let (release, full) = rest.split_once(", V").unwrap_or_else(|| panic!("{} --version: {line:?}", tool.display()));
    let release =
        CudaVersion::parse(release).unwrap_or_else(|| panic!("{} --version: release in {line:?}", tool.display()));
    assert!(
        CudaVersion::parse(full) == Some(release),
        "{} --version: release {release} and version {full} disagree",
        tool.display()
    );
    (release, full.trim().to_string())
}

/// The quoted values `--help` allows for `--gpu-name`, `sm_*` only, `sm_` stripped, in ptxas's order.
fn gpu_names(ptxas: &Path) -> Vec<String> {
    let help = stdout_of(Std::new(ptxas).arg("--help"));
    let start = help.find("\n--gpu-name ").unwrap_or_else(|| panic!("{} --help has no --gpu-name", ptxas.display()));
    let para = &help[start + 1..];
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    let allowed = para
        .split_once("Allowed values for this option:")
        .unwrap_or_else(|| panic!("{} --help: no allowed values for --gpu-name: {para}", ptxas.display()))
        .1;
    let allowed = allowed.split("Default value:").next().unwrap();
    let values: Vec<&str> = allowed.split('\'').skip(1).step_by(2).collect();
    let sm: Vec<String> = values.iter().filter_map(|v| v.strip_prefix("sm_")).map(str::to_string).collect();
    assert!(!sm.is_empty(), "{} --help: no sm_* among --gpu-name's values {values:?}", ptxas.display());
    sm
}

/// The newest PTX ISA `ptxas` reads: the version it names when refusing `.version 99.9`, which it
/// must then assemble (for `target`).
fn max_ptx_isa(ptxas: &Path, target: &str, dir: &Path) -> String {
    let ptx = |v: &str| format!(".version {v}\n.target sm_{target}\n.address_size 64\n");
    let src = dir.join("probe.ptx");
    std::fs::write(&src, ptx("99.9")).unwrap();
    let out =
        run(Std::new(ptxas).args(["-arch", &format!("sm_{target}")]).arg(&src).arg("-o").arg(dir.join("probe.cubin")));
    let err = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{} assembled PTX .version 99.9: {err}", ptxas.display());
    let isa = err
        .split_once("current version is '")
        .and_then(|(_, r)| r.split_once('\''))
        .unwrap_or_else(|| {
            panic!("{} names no current PTX version when refusing .version 99.9: {err}", ptxas.display())
        })
        .0
        .to_string();
    std::fs::write(&src, ptx(&isa)).unwrap();
    let out =
        run(Std::new(ptxas).args(["-arch", &format!("sm_{target}")]).arg(&src).arg("-o").arg(dir.join("probe.cubin")));
    assert!(
        out.status.success(),
        "{} names PTX ISA {isa} as its current version but refuses it: {}",
        ptxas.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    isa
}

/// `tool` and `rows` compared as sets: what each has that the other lacks, and duplicates in `rows`.
fn set_diff(what: &str, tool: &[String], rows: &[String]) -> Option<String> {
    let t: BTreeSet<&String> = tool.iter().collect();
    let r: BTreeSet<&String> = rows.iter().collect();
    let mut problems = Vec::new();
    if t != r {
        let missing: Vec<_> = t.difference(&r).collect();
        let extra: Vec<_> = r.difference(&t).collect();
        problems.push(format!(
            "{what}: the tool has but the table lacks {missing:?}; the table has but the tool lacks {extra:?}"
        ));
    }
    if r.len() != rows.len() {
        problems.push(format!("{what}: the table lists some twice: {rows:?}"));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Everything the table and cudalint say about one real ptxas that the ptxas contradicts.
fn check_ptxas(ptxas: &Path, t: &Table) -> Vec<String> {
    let name = ptxas.display();
    let mut problems = Vec::new();
    let (release, full) = banner_version(ptxas);
    let targets = gpu_names(ptxas);
    let oldest = targets
        .iter()
        .min_by_key(|v| v.trim_end_matches(['a', 'f']).parse::<u32>().unwrap_or(u32::MAX))
        .unwrap()
        .clone();
    let dir = tempfile::tempdir().unwrap();
    let isa = max_ptx_isa(ptxas, &oldest, dir.path());
    println!("{name}: release {release}, V{full}, PTX ISA {isa}, --gpu-name sm_ {targets:?}");

    let (kind, version, source) = static_toolchain(ptxas);
    if (kind.as_str(), version.as_str(), source.as_str()) != ("ptxas", full.as_str(), "banner") {
        problems.push(format!(
            "{name}: cudalint reads {kind} {version} (from {source:?}); --version says ptxas {full} (expected from \"banner\")"
        ));
    }
    match t.ptxas(release) {
        None => problems.push(format!("{name}: the table has no [[ptxas]] row for release {release}")),
        Some(row) => {
            if let Some(d) = set_diff(&format!("{name}: [[ptxas]] {release} targets"), &targets, &row.targets) {
                problems.push(d);
            }
            if row.max_ptx_isa != isa {
                problems.push(format!(
                    "{name}: [[ptxas]] {release} max_ptx_isa = {:?}, ptxas reads {isa:?}",
                    row.max_ptx_isa
                ));
            }
        }
    }
    problems
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "the table or cudalint disagrees with NVIDIA's tools:\n{}", problems.join("\n"));
}

fn check_cuda_tools_ptxas(t: &Table) -> Vec<String> {
    let tools = cuda_tools();
    let mut problems = Vec::new();
    for rel in ["cu11/nvidia/cuda_nvcc/bin/ptxas", "cu12/nvidia/cuda_nvcc/bin/ptxas", "cu13/nvidia/cu13/bin/ptxas"] {
        let ptxas = tools.join(rel);
        assert!(ptxas.is_file(), "{} missing: scripts/fetch-cuda-tools.sh should have installed it", ptxas.display());
        problems.extend(check_ptxas(&ptxas, t));
    }
    problems
}

fn check_triton(t: &Table) -> Vec<String> {
    let (whl, triton) = wheel("triton");
    let dir = tempfile::tempdir().unwrap();
    let ptxas = extract(&whl, &["triton/backends/nvidia/bin/ptxas"], dir.path()).remove(0);
    let mut problems = check_ptxas(&ptxas, t);

    let (release, _) = banner_version(&ptxas);
    let blackwell = wheel_has(&whl, "triton/backends/nvidia/bin/ptxas-blackwell");
    println!("triton {triton}: ptxas {release}, ptxas-blackwell bundled: {blackwell}");
    match t.triton_release.iter().find(|r| r.version == triton) {
        None => problems.push(format!("the table has no [[triton_release]] row for {triton}")),
        Some(row) => {
            if CudaVersion::parse(&row.ptxas) != Some(release) {
                problems.push(format!(
                    "[[triton_release]] {triton}: ptxas = {:?}, the wheel bundles ptxas {release}",
                    row.ptxas
                ));
            }
            if row.ptxas_blackwell.is_empty() == blackwell {
                problems.push(format!(
                    "[[triton_release]] {triton}: ptxas_blackwell = {:?}, the wheel {} ptxas-blackwell",
                    row.ptxas_blackwell,
                    if blackwell { "bundles" } else { "bundles no" }
                ));
            }
        }
    }
    problems
}

/// Loads NVRTC (argv[1]) and prints its version, supported archs and the PTX it writes for the
/// oldest of them, as JSON.
const NVRTC_PY: &str = r#"
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
def ok(r, what):
    if r != 0:
        raise SystemExit(f"{what} returned {r}")
major, minor, n = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
ok(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
ok(lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
archs = (ctypes.c_int * n.value)()
ok(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
archs = list(archs)
prog = ctypes.c_void_p()
src = b'extern "C" __global__ void k() {}'
ok(lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None), "nvrtcCreateProgram")
opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_%d" % min(archs))
ok(lib.nvrtcCompileProgram(prog, 1, opts), "nvrtcCompileProgram")
size = ctypes.c_size_t()
ok(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
ptx = ctypes.create_string_buffer(size.value)
ok(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
print(json.dumps({"major": major.value, "minor": minor.value, "archs": archs, "ptx": ptx.value.decode()}))
"#;

/// Runs `script` with python3 on `lib`, its directory on LD_LIBRARY_PATH (where NVRTC finds its
/// builtins), and returns the JSON it prints.
fn python_json(script: &str, lib: &Path) -> Value {
    let python = need("python3", "python3");
    let dir = lib.parent().unwrap();
    let out = run(Std::new(python).arg("-c").arg(script).arg(lib).env("LD_LIBRARY_PATH", dir));
    assert!(out.status.success(), "python3 ctypes on {}: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn check_nvrtc(t: &Table) -> Vec<String> {
    let (whl, _) = wheel("nvidia-cuda-nvrtc-cu12");
    let mut problems = Vec::new();
    for (lib, builtins) in
        [("libnvrtc.so.12", "libnvrtc-builtins.so."), ("libnvrtc.alt.so.12", "libnvrtc-builtins.alt.so.")]
    {
        let dir = tempfile::tempdir().unwrap();
        let members: Vec<String> = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap())
            .unwrap()
            .file_names()
            .filter(|n| n.starts_with("nvidia/cuda_nvrtc/lib/"))
            .filter(|n| n.ends_with(&format!("/{lib}")) || n.rsplit('/').next().unwrap().starts_with(builtins))
            .map(str::to_string)
            .collect();
        assert_eq!(members.len(), 2, "{}: {lib} and its builtins expected, found {members:?}", whl.display());
        let paths = extract(&whl, &members.iter().map(String::as_str).collect::<Vec<_>>(), dir.path());
        let so = paths.into_iter().find(|p| p.file_name().unwrap() == lib).unwrap();
        problems.extend(check_nvrtc_lib(t, &so));
    }
    problems
}

/// NVRTC 11.8 (nvidia-cuda-nvrtc-cu11 11.8.89 from scripts/fetch-cuda-tools.sh, whose file name
/// says 11.2: only its bytes say 11.8) against its row, and CuPy's `cupy-cuda11x` clamp's
/// premise, that it refuses sm_90a as every 'a' form.
fn check_nvrtc_11(t: &Table) -> Vec<String> {
    let so = cuda_tools().join("nvrtc11/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2");
    assert!(so.is_file(), "{} missing: scripts/fetch-cuda-tools.sh installs it", so.display());
    check_nvrtc_lib(t, &so)
}

/// One NVRTC library: what it says of itself (through ctypes) against its row and against
/// what cudalint reads of its bytes, under its own name and renamed (found by its bytes alone).
fn check_nvrtc_lib(t: &Table, so: &Path) -> Vec<String> {
    let lib = so.file_name().unwrap().to_string_lossy().to_string();
    let mut problems = Vec::new();
    let r = python_json(NVRTC_PY, so);
    let (major, minor) = (r["major"].as_u64().unwrap(), r["minor"].as_u64().unwrap());
    let release = CudaVersion::new(major as u16, minor as u16);
    let archs: Vec<u32> = r["archs"].as_array().unwrap().iter().map(|a| a.as_u64().unwrap() as u32).collect();
    let ptx = r["ptx"].as_str().unwrap();
    let isa = ptx
        .lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .unwrap_or_else(|| panic!("{lib}: no .version in the PTX it wrote: {ptx}"))
        .trim()
        .to_string();
    let full = ptx
        .lines()
        .find_map(|l| l.split_once("Cuda compilation tools, release ").and_then(|(_, r)| r.split_once(", V")))
        .unwrap_or_else(|| panic!("{lib}: no release line in the PTX it wrote: {ptx}"))
        .1
        .trim()
        .to_string();
    println!("{lib}: nvrtcVersion {release}, writes PTX ISA {isa} as V{full}, nvrtcGetSupportedArchs {archs:?}");

    // Under its own name, and copied under a name no row knows (`libjitrt.so`): its bytes say.
    let renamed = tempfile::tempdir().unwrap();
    let other = renamed.path().join("libjitrt.so");
    std::fs::copy(so, &other).unwrap();
    for file in [so, other.as_path()] {
        let (kind, version, source) = static_toolchain(file);
        let name = file.file_name().unwrap().to_string_lossy();
        if kind != "nvrtc" || source != "banner" || version != full {
            problems.push(format!(
                "{lib} as {name}: cudalint reads {kind} {version} (from {source:?}); NVRTC says nvrtc {full} (expected from \"banner\")"
            ));
        }
    }
    if !full.starts_with(&format!("{release}.")) {
        problems.push(format!("{lib}: its PTX says V{full}; nvrtcVersion says {release}"));
    }
    match t.nvrtc(release) {
        None => problems.push(format!("{lib}: the table has no [[nvrtc]] row for release {release}")),
        Some(row) => {
            if row.archs != archs {
                let (tool, rows): (Vec<String>, Vec<String>) =
                    (archs.iter().map(u32::to_string).collect(), row.archs.iter().map(u32::to_string).collect());
                let diff = set_diff(&format!("{lib}: [[nvrtc]] {release} archs"), &tool, &rows);
                problems.push(diff.unwrap_or_else(|| {
                    format!("{lib}: [[nvrtc]] {release} archs {:?}, nvrtcGetSupportedArchs {archs:?}", row.archs)
                }));
            }
            if row.ptx_isa != isa {
                problems.push(format!("{lib}: [[nvrtc]] {release} ptx_isa = {:?}, NVRTC writes {isa:?}", row.ptx_isa));
            }
        }
    }
    problems
}

const NVJITLINK_PY: &str = r#"
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
major, minor = ctypes.c_uint(), ctypes.c_uint()
r = lib.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor))
if r != 0:
    raise SystemExit(f"nvJitLinkVersion returned {r}")
print(json.dumps({"major": major.value, "minor": minor.value}))
"#;

fn check_nvjitlink(t: &Table) -> Vec<String> {
    let (whl, package) = wheel("nvidia-nvjitlink-cu12");
    let dir = tempfile::tempdir().unwrap();
    let so = extract(&whl, &["nvidia/nvjitlink/lib/libnvJitLink.so.12"], dir.path()).remove(0);
    let nm = need("nm", "binutils");
    let syms = stdout_of(Std::new(nm).args(["-D", "--defined-only"]).arg(&so));
    let newest = syms
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|s| s.split('@').next().unwrap().strip_prefix("__nvJitLinkCreate_"))
        .filter_map(|v| v.split_once('_').and_then(|(a, b)| Some(CudaVersion::new(a.parse().ok()?, b.parse().ok()?))))
        .max()
        .expect("libnvJitLink.so.12 exports no __nvJitLinkCreate_X_Y");
    let r = python_json(NVJITLINK_PY, &so);
    let reported = CudaVersion::new(r["major"].as_u64().unwrap() as u16, r["minor"].as_u64().unwrap() as u16);
    println!("libnvJitLink.so.12: nvJitLinkVersion {reported}, newest __nvJitLinkCreate_ {newest}, wheel {package}");

    let mut problems = Vec::new();
    if reported != newest {
        problems.push(format!("nvJitLinkVersion says {reported} but the newest __nvJitLinkCreate_ is {newest}"));
    }
    let (kind, version, source) = static_toolchain(&so);
    if kind != "nvjitlink" || source != "banner" || version != package {
        problems.push(format!(
            "cudalint reads {kind} {version} (from {source:?}); the wheel is nvjitlink {package} (expected from \"banner\")"
        ));
    }
    if CudaVersion::parse(&version) != Some(newest) {
        problems.push(format!("cudalint reads nvJitLink {version}; its newest __nvJitLinkCreate_ is {newest}"));
    }
    // nvJitLink assembles with its own release's ptxas: the linter judges it by that row.
    if t.ptxas(newest).is_none() {
        problems.push(format!("the table has no [[ptxas]] row for nvJitLink's release {newest}"));
    }
    problems
}

fn check_nvcc(t: &Table) -> Vec<String> {
    let nvcc = cuda_tools().join("cu13/nvidia/cu13/bin/nvcc");
    assert!(nvcc.is_file(), "{} missing: scripts/fetch-cuda-tools.sh should have installed it", nvcc.display());
    let (release, full) = banner_version(&nvcc);
    let codes: Vec<String> = stdout_of(Std::new(&nvcc).arg("--list-gpu-code"))
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("sm_"))
        .map(str::to_string)
        .collect();
    assert!(!codes.is_empty(), "{} --list-gpu-code lists no sm_*", nvcc.display());
    println!("nvcc: release {release}, V{full}, --list-gpu-code sm_ {codes:?}");

    let mut problems = Vec::new();
    let (kind, version, source) = static_toolchain(&nvcc);
    if (kind.as_str(), version.as_str(), source.as_str()) != ("nvcc", full.as_str(), "banner") {
        problems.push(format!(
            "nvcc: cudalint reads {kind} {version} (from {source:?}); --version says nvcc {full} (expected from \"banner\")"
        ));
    }
    match t.ptxas(release) {
        None => problems.push(format!("nvcc: the table has no [[ptxas]] row for release {release}")),
        Some(row) => {
            let missing: Vec<&String> = codes.iter().filter(|c| !row.targets.contains(c)).collect();
            if !missing.is_empty() {
                problems.push(format!("nvcc {release} builds sm_ {missing:?}, which [[ptxas]] {release} targets lack"));
            }
        }
    }
    problems
}

#[test]
fn ptxas_from_cuda_tools_match_their_rows() {
    assert_none(check_cuda_tools_ptxas(table()));
}

#[test]
fn triton_bundled_ptxas_matches_its_rows() {
    assert_none(check_triton(table()));
}

#[test]
fn nvrtc_matches_its_row() {
    assert_none(check_nvrtc(table()));
}

#[test]
fn nvrtc_11_8_matches_its_row() {
    assert_none(check_nvrtc_11(table()));
}

/// NVIDIA's static nvPTXCompiler (nvidia-nvptxcompiler 13.0.88, from scripts/fetch-cuda-tools.sh)
/// linked by gcc into the library of a package no row names, as a vendor links it: only the
/// members the library's calls need. cudalint finds the compiler by its bytes — kind, the version
/// the compiler itself reports (`nvPTXCompilerGetVersion`, through ctypes), `linked` — lists it,
/// and judges the package by it: CUDA 13.0's assembler knows no sm_70 (a warning on a V100,
/// CL021), and knows sm_90 (nothing on an H100). The same by seek and by stream.
#[test]
fn a_compiler_linked_into_a_library_is_found_by_its_bytes_and_judged() {
    use crate::images::{Comp, Ent, Image, docker_archive_legacy, tar};
    let archive = cuda_tools().join("ptxcomp/nvidia/cu13/lib/libnvptxcompiler_static.a");
    assert!(archive.is_file(), "{} missing: scripts/fetch-cuda-tools.sh installs it", archive.display());
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("jit.c");
    std::fs::write(
        &src,
        "typedef struct nvPTXCompiler *nvPTXCompilerHandle;\n\
         int nvPTXCompilerGetVersion(unsigned *, unsigned *);\n\
         int nvPTXCompilerCreate(nvPTXCompilerHandle *, unsigned long, const char *);\n\
         int jit_version(unsigned *a, unsigned *b) { return nvPTXCompilerGetVersion(a, b); }\n\
         int jit_create(nvPTXCompilerHandle *h, const char *p, unsigned long n) { return nvPTXCompilerCreate(h, n, p); }\n",
    )
    .unwrap();
    let so = dir.path().join("libjitpkg.so");
    stdout_of(Std::new(need("gcc", "gcc")).args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&src).arg(&archive).args([
        "-lpthread",
        "-lm",
        "-lstdc++",
        "-ldl",
    ]));
    let v = python_json(
        "import ctypes, json, sys\nlib = ctypes.CDLL(sys.argv[1])\na, b = ctypes.c_uint(), ctypes.c_uint()\n\
         assert lib.jit_version(ctypes.byref(a), ctypes.byref(b)) == 0\nprint(json.dumps([a.value, b.value]))\n",
        &so,
    );
    let release = format!("{}.{}", v[0], v[1]);

    let site = "usr/local/lib/python3.11/site-packages";
    let layer = tar(&[
        Ent::File("usr/local/lib/python3.11/site-packages/jitpkg/libjitpkg.so", std::fs::read(&so).unwrap()),
        Ent::File(
            "usr/local/lib/python3.11/site-packages/jitpkg-1.0.dist-info/RECORD",
            b"jitpkg/libjitpkg.so,,\n".to_vec(),
        ),
    ]);
    let image = docker_archive_legacy(&Image::new(vec![(layer, Comp::Gzip)]), "jit:1");
    let file = dir.path().join("jit.tar");
    std::fs::write(&file, &image).unwrap();
    let scan = |stdin: bool| -> Value {
        let mut cmd = Command::cargo_bin("cudalint").unwrap();
        cmd.args(["scan", "--gpu", "V100,H100", "--format", "json"]);
        if stdin {
            cmd.arg("-").write_stdin(image.clone());
        } else {
            cmd.arg(&file);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "scan: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (seek, stream) = (scan(false), scan(true));
    for key in ["compilers", "compiler_checks", "findings"] {
        assert_eq!(seek[key], stream[key], "{key}: seek and stream differ");
    }
    let path = format!("/{site}/jitpkg/libjitpkg.so");
    let found = seek["compilers"].as_array().unwrap().iter().find(|c| c["path"] == path.as_str());
    let found = found.unwrap_or_else(|| panic!("{path} not among the compilers: {}", seek["compilers"]));
    assert_eq!(found["kind"], "nvptxcompiler", "{found}");
    assert_eq!(found["linked"], true, "{found}");
    let version = found["version"].as_str().unwrap();
    assert!(version.starts_with(&format!("{release}.")), "cudalint reads {version}; the compiler says {release}");
    let checks = seek["compiler_checks"].as_array().unwrap();
    let on = |gpu: &str| {
        checks
            .iter()
            .find(|c| c["target"] == gpu && c["consumer"] == "jitpkg")
            .unwrap_or_else(|| panic!("jitpkg not judged on {gpu}: {checks:?}"))
            .clone()
    };
    assert_eq!(on("V100")["knows_target"], false, "{}", on("V100"));
    assert!(on("V100")["fix"].as_str().unwrap().contains("12.9 (the newest that knows sm_70"), "{}", on("V100"));
    assert_eq!(on("H100")["knows_target"], true, "{}", on("H100"));
    let findings = seek["findings"].as_array().unwrap();
    let cl021 =
        |gpu: &str| findings.iter().any(|f| f["rule"] == "CL021" && f["target"] == gpu && f["path"] == path.as_str());
    assert!(cl021("V100"), "no CL021 for jitpkg on V100: {findings:?}");
    assert!(!cl021("H100"), "a CL021 for jitpkg on H100: {findings:?}");
}

#[test]
fn nvjitlink_version_matches_its_symbols() {
    assert_none(check_nvjitlink(table()));
}

#[test]
fn nvcc_matches_its_ptxas_row() {
    assert_none(check_nvcc(table()));
}

/// The checks above can fail: every row they read, drifted (a target dropped, one invented, the
/// PTX ISA changed, Triton's bundled release changed) or removed, is reported for every tool.
#[test]
fn drifted_or_missing_rows_are_caught() {
    let mut drifted = table().clone();
    for row in &mut drifted.ptxas {
        row.targets.remove(0);
        row.targets.push("999".into());
        row.max_ptx_isa = "0.0".into();
    }
    for row in &mut drifted.nvrtc {
        row.archs.push(999);
        row.ptx_isa = "0.0".into();
    }
    for row in &mut drifted.triton_release {
        row.ptxas = "0.0".into();
        row.ptxas_blackwell = if row.ptxas_blackwell.is_empty() { "0.0".into() } else { String::new() };
    }
    let count = |problems: &[String], needle: &str| problems.iter().filter(|p| p.contains(needle)).count();

    let p = check_cuda_tools_ptxas(&drifted);
    assert_eq!(count(&p, "the table has but the tool lacks [\"999\"]"), 3, "{p:#?}");
    assert_eq!(count(&p, "max_ptx_isa = \"0.0\""), 3, "{p:#?}");
    let p = check_triton(&drifted);
    assert_eq!(count(&p, "the table has but the tool lacks [\"999\"]"), 1, "{p:#?}");
    assert_eq!(count(&p, "max_ptx_isa = \"0.0\""), 1, "{p:#?}");
    assert_eq!(count(&p, "[[triton_release]]"), 2, "{p:#?}");
    let p = check_nvrtc(&drifted);
    assert_eq!(count(&p, "the table has but the tool lacks [\"999\"]"), 2, "{p:#?}");
    assert_eq!(count(&p, "ptx_isa = \"0.0\""), 2, "{p:#?}");
    let p = check_nvrtc_11(&drifted);
    assert_eq!(count(&p, "the table has but the tool lacks [\"999\"]"), 1, "{p:#?}");
    let p = check_nvcc(&drifted);
    assert_eq!(count(&p, "which [[ptxas]]"), 1, "{p:#?}");

    let mut empty = table().clone();
    empty.ptxas.clear();
    empty.nvrtc.clear();
    empty.triton_release.clear();
    for (p, n) in [
        (check_cuda_tools_ptxas(&empty), 3),
        (check_triton(&empty), 2),
        (check_nvrtc(&empty), 2),
        (check_nvrtc_11(&empty), 1),
        (check_nvjitlink(&empty), 1),
        (check_nvcc(&empty), 1),
    ] {
        assert_eq!(count(&p, "the table has no"), n, "{p:#?}");
    }
}
