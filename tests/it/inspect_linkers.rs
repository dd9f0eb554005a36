//! Real host libraries from every common linker and post-link editor: GNU ld (bfd), gold, lld,
//! patchelf, section-table stripping (`llvm-objcopy --strip-sections`, sstrip), a renamed /
//! NOBITS / out-of-file / not-allocated / empty `.nv_fatbin`, a zeroed section table and one
//! holding only its name table. Each is
//! built here (gcc, binutils, lld, patchelf, llvm-objcopy) around the committed
//! `vecadd.fatbin`, registered as nvcc's host code does. The device code must be found the way
//! the loader finds it, the same by seek and by stream, and equal to cuobjdump's listing.

use std::path::{Path, PathBuf};
use std::process::Command;

use cudalint::input::{FileInput, StreamInput};
use cudalint::inspect::{Entry, FileReport, InspectOptions, inspect_input};
use goblin::elf::Elf;

use crate::util::{fixture, fixture_names, read_fixture, run};

/// nvcc's host-side registration: the container in `.nv_fatbin`, a wrapper (magic 0x466243b1,
/// version 1, data pointer; doc §1.2) in `.nvFatBinSegment`.
const LIB_C: &str = r#"
__asm__(".section .nv_fatbin,\"a\"\n.balign 8\nfatbin_data:\n.incbin \"FATBIN\"\n.previous\n");
extern const char fatbin_data[] __asm__("fatbin_data");
struct wrapper { int magic; int version; const void *data; void *filename; };
__attribute__((section(".nvFatBinSegment"), aligned(8), used))
const struct wrapper fatbin_wrapper = {0x466243b1, 1, fatbin_data, 0};
const void *registered(void) { return &fatbin_wrapper; }
"#;

const SONAME: &str = "libvec.so.1";

/// Fails (never skips) when a tool is missing, naming the Debian package that has it.
fn tool(name: &str, package: &str) -> String {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    found.map(|p| p.display().to_string()).unwrap_or_else(|| {
        panic!(
            "`{name}` is needed by this test and is not installed: run scripts/install-test-deps.sh \
             {name}:{package} (Debian package {package})"
        )
    })
}

struct Libs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Libs {
    fn new() -> Libs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("lib.c"), LIB_C.replace("FATBIN", &fixture("vecadd.fatbin").display().to_string()))
            .unwrap();
        // Enough symbols for a `.strtab` far larger than the tail a stream keeps before the
        // section table (lld writes `.shstrtab` before it).
        let syms: String = (0..4000)
            .map(|i| format!("int a_rather_long_symbol_name_to_grow_the_strtab_{i:05}(void) {{ return {i}; }}\n"))
            .collect();
        std::fs::write(path.join("syms.c"), syms).unwrap();
        Libs { _dir: dir, path }
    }

    fn link(&self, ld: &str) -> PathBuf {
        tool("gcc", "gcc");
        match ld {
            "lld" => tool("ld.lld", "lld"),
            "gold" => tool("ld.gold", "binutils"),
            _ => tool("ld.bfd", "binutils"),
        };
        let out = self.path.join(format!("libvec-{ld}.so"));
        run(Command::new("gcc")
            .current_dir(&self.path)
            .args(["-shared", "-fPIC", &format!("-fuse-ld={ld}"), &format!("-Wl,-soname,{SONAME}"), "-o"])
            .arg(&out)
            .args(["lib.c", "syms.c"]));
        out
    }

    fn derive(&self, from: &Path, name: &str, edit: impl FnOnce(&Path)) -> PathBuf {
        let out = self.path.join(name);
        std::fs::copy(from, &out).unwrap();
        edit(&out);
        out
    }
}

/// What ELFkickers' `sstrip` does (not packaged by Debian): cut the file after the last loaded
/// byte and clear the section table fields of the ELF header.
fn sstrip(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let end = elf.program_headers.iter().map(|p| p.p_offset + p.p_filesz).max().unwrap() as usize;
    drop(elf);
    bytes.truncate(end);
    bytes[0x28..0x30].fill(0); // e_shoff
    bytes[0x3c..0x40].fill(0); // e_shnum, e_shstrndx
    std::fs::write(path, bytes).unwrap();
}

/// Rewrites a field of `.nv_fatbin`'s section header (ELF64 little-endian).
fn patch_fatbin_header(path: &Path, field_at: usize, value: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let i = elf.section_headers.iter().position(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(".nv_fatbin")).unwrap();
    let at = elf.header.e_shoff as usize + i * usize::from(elf.header.e_shentsize) + field_at;
    drop(elf);
    bytes[at..at + value.len()].copy_from_slice(value);
    std::fs::write(path, bytes).unwrap();
}

/// Section-table edits the loader never sees (ld.so and the CUDA runtime go by segments and
/// the registered wrapper): all section headers zeroed, or the table cut to its name table.
fn zero_section_table(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let (off, n) = (elf.header.e_shoff as usize, usize::from(elf.header.e_shnum) * 64);
    drop(elf);
    bytes[off..off + n].fill(0);
    std::fs::write(path, bytes).unwrap();
}

fn names_only_section_table(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let (off, names) = (elf.header.e_shoff as usize, usize::from(elf.header.e_shstrndx));
    drop(elf);
    let strtab = bytes[off + names * 64..off + names * 64 + 64].to_vec();
    bytes[off + 64..off + 128].copy_from_slice(&strtab);
    bytes[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes()); // e_shnum
    bytes[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes()); // e_shstrndx
    std::fs::write(path, bytes).unwrap();
}

fn seek(path: &Path, opts: &InspectOptions) -> FileReport {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    inspect_input(&mut FileInput::new(&file, 0, len), &path.display().to_string(), opts).unwrap()
}

fn stream(path: &Path, opts: &InspectOptions) -> FileReport {
    let bytes = std::fs::read(path).unwrap();
    inspect_input(&mut StreamInput::new(&bytes[..], bytes.len() as u64), &path.display().to_string(), opts).unwrap()
}

/// Seek and stream must give the same JSON; returns the (seeked) report.
fn both(path: &Path, opts: &InspectOptions) -> FileReport {
    let (a, b) = (seek(path, opts), stream(path, opts));
    assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap(), "{}", path.display());
    a
}

/// What identifies a module's images, independent of where the container sits.
fn images(r: &FileReport) -> Vec<(String, String, [u16; 2])> {
    r.containers
        .iter()
        .flat_map(|c| c.images())
        .map(|e: &Entry| (format!("{:?}", e.kind), e.arch.clone(), e.code_version))
        .collect()
}

fn lean() -> InspectOptions {
    InspectOptions { lean: true, ..Default::default() }
}

/// The library from each linker, and each edited the ways real files are: (what, path, SONAME).
fn variants(libs: &Libs) -> Vec<(String, PathBuf, &'static str)> {
    let patchelf = tool("patchelf", "patchelf");
    let objcopy = tool("objcopy", "binutils");
    let llvm_objcopy = tool("llvm-objcopy", "llvm");
    let mut cases: Vec<(String, PathBuf, &'static str)> = Vec::new();
    for ld in ["bfd", "gold", "lld"] {
        let lib = libs.link(ld);
        cases.push((ld.to_string(), lib.clone(), SONAME));
        cases.push((
            format!("{ld}+patchelf"),
            libs.derive(&lib, &format!("libvec-{ld}-patched.so"), |p| {
                // Two runs: patchelf 0.14 given both options at once writes the DT_NEEDED
                // string as the SONAME too.
                run(Command::new(&patchelf).args(["--set-soname", "libvec-repaired.so.1"]).arg(p));
                run(Command::new(&patchelf).args(["--add-needed", "libcudart.so.12"]).arg(p));
            }),
            "libvec-repaired.so.1",
        ));
        cases.push((
            format!("{ld}+strip-sections"),
            libs.derive(&lib, &format!("libvec-{ld}-nosections.so"), |p| {
                run(Command::new(&llvm_objcopy).arg("--strip-sections").arg(p));
            }),
            SONAME,
        ));
        cases.push((format!("{ld}+sstrip"), libs.derive(&lib, &format!("libvec-{ld}-sstrip.so"), sstrip), SONAME));
        cases.push((
            format!("{ld}+renamed"),
            libs.derive(&lib, &format!("libvec-{ld}-renamed.so"), |p| {
                run(Command::new(&objcopy).arg("--rename-section").arg(".nv_fatbin=.rodata.blob").arg(p));
            }),
            SONAME,
        ));
        // sh_type (+4) = SHT_NOBITS; sh_offset (+24) past the end of the file.
        cases.push((
            format!("{ld}+nobits"),
            libs.derive(&lib, &format!("libvec-{ld}-nobits.so"), |p| patch_fatbin_header(p, 4, &8u32.to_le_bytes())),
            SONAME,
        ));
        // sh_flags (+8) without SHF_ALLOC; sh_size (+32) 0: the bytes are still loaded.
        cases.push((
            format!("{ld}+not-alloc"),
            libs.derive(&lib, &format!("libvec-{ld}-notalloc.so"), |p| patch_fatbin_header(p, 8, &0u64.to_le_bytes())),
            SONAME,
        ));
        cases.push((
            format!("{ld}+size-0"),
            libs.derive(&lib, &format!("libvec-{ld}-size0.so"), |p| patch_fatbin_header(p, 32, &0u64.to_le_bytes())),
            SONAME,
        ));
        cases.push((
            format!("{ld}+zeroed-table"),
            libs.derive(&lib, &format!("libvec-{ld}-zeroedtable.so"), zero_section_table),
            SONAME,
        ));
        cases.push((
            format!("{ld}+names-only"),
            libs.derive(&lib, &format!("libvec-{ld}-namesonly.so"), names_only_section_table),
            SONAME,
        ));
        cases.push((
            format!("{ld}+past-end"),
            libs.derive(&lib, &format!("libvec-{ld}-pastend.so"), |p| {
                patch_fatbin_header(p, 24, &(1u64 << 40).to_le_bytes())
            }),
            SONAME,
        ));
    }
    cases
}

#[test]
fn every_linker_and_editor_gives_the_inventory_cuobjdump_lists() {
    let libs = Libs::new();
    let dump = crate::cuobjdump::load("vecadd.fatbin");
    let listed: Vec<(String, Option<String>)> = dump.entries.iter().map(|e| (e.kind.clone(), e.arch.clone())).collect();
    assert!(!listed.is_empty());

    let bfd = libs.link("bfd");
    let reference = seek(&bfd, &InspectOptions::default());
    assert_eq!(reference.elf.as_ref().unwrap().soname.as_deref(), Some(SONAME));
    assert_eq!(reference.containers.len(), 1, "{reference:#?}");
    let ours: Vec<(String, Option<String>)> = reference.containers[0]
        .images()
        .map(|e| {
            (
                if e.kind == cudalint::inspect::fatbin::EntryKind::Ptx { "ptx" } else { "elf" }.to_string(),
                Some(e.arch.replace("compute_", "sm_")),
            )
        })
        .collect();
    assert_eq!(ours, listed);

    let cases = variants(&libs);
    for (what, path, soname) in &cases {
        for opts in [lean(), InspectOptions::default(), InspectOptions { every_cubin: true, ..Default::default() }] {
            let r = both(path, &opts);
            assert_eq!(r.elf.as_ref().and_then(|e| e.soname.as_deref()), Some(*soname), "{what}");
            assert_eq!(r.containers.len(), 1, "{what}: one registered module: {r:#?}");
            assert_eq!(r.containers[0].wrapper_version, Some(1), "{what}");
            assert!(r.hidden_containers.is_empty(), "{what}");
            assert_eq!(images(&r), images(&reference), "{what}");
            assert!(r.cuda_sign, "{what}");
            assert_eq!(r.all_problems(), Vec::<String>::new(), "{what}");
        }
        if what.ends_with("patchelf") {
            let r = seek(path, &lean());
            assert_eq!(r.elf.unwrap().cuda_needed, ["libcudart.so.12"], "{what}");
        }
    }
}

/// A wrapper whose container cannot be read (here: its bytes zeroed) is a problem, and the file
/// shows a CUDA sign: never a silent "no device code".
#[test]
fn a_wrapper_pointing_at_nothing_readable_is_a_problem() {
    let libs = Libs::new();
    let lib = libs.link("lld");
    let broken = libs.derive(&lib, "libvec-zeroed.so", |p| {
        let mut bytes = std::fs::read(p).unwrap();
        let fatbin = read_fixture("vecadd.fatbin");
        let at = memchr::memmem::find(&bytes, &fatbin[..64]).unwrap();
        bytes[at..at + 16].fill(0);
        std::fs::write(p, bytes).unwrap();
    });
    for opts in [lean(), InspectOptions::default()] {
        let r = both(&broken, &opts);
        assert!(r.containers.is_empty());
        assert!(r.cuda_sign);
        let problems = r.all_problems();
        assert!(problems.iter().any(|m| m.contains("fatbin wrapper points at")), "{problems:?}");
    }
}

/// Every committed fixture, lean (as image scans read) and decoding every cubin: identical JSON
/// by seek and by stream.
#[test]
fn seek_and_stream_agree_on_every_fixture_lean_and_full() {
    for name in fixture_names() {
        for opts in [lean(), InspectOptions { every_cubin: true, kernel_names: true, ..Default::default() }] {
            let path = fixture(&name);
            let (a, b) = (seek(&path, &opts), stream(&path, &opts));
            let (ja, jb) = (serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
            if name.starts_with("damaged") {
                // Damage is found either way; where it was noticed may differ.
                assert_eq!(a.containers.len(), b.containers.len(), "{name}");
                assert_eq!(a.all_problems().is_empty(), b.all_problems().is_empty(), "{name}");
                continue;
            }
            assert_eq!(ja, jb, "{name}");
        }
    }
}

/// The same libraries in an image: every transport (seeked uncompressed layers, gzip and zstd
/// layers read in one pass, a docker-archive) gives the same inventory.
#[test]
fn every_transport_gives_the_same_inventory_of_the_linked_libraries() {
    use crate::images::{Comp, Ent, Image, docker_archive_legacy, oci_layout, tar};
    let libs = Libs::new();
    let cases = variants(&libs);
    let entries: Vec<Ent> = cases
        .iter()
        .map(|(_, p, _)| {
            let name = format!("usr/lib/{}", p.file_name().unwrap().to_str().unwrap());
            Ent::RawFile(name.into_bytes(), std::fs::read(p).unwrap())
        })
        .collect();
    let layer = tar(&entries);
    let tmp = tempfile::tempdir().unwrap();
    let opts = cudalint::image::ScanOptions { progress: false, ..Default::default() };
    let mut reports = Vec::new();
    for c in [Comp::None, Comp::Gzip, Comp::Zstd] {
        let d = tmp.path().join(format!("{c:?}"));
        oci_layout(&d, &[&Image::new(vec![(layer.clone(), c)])]);
        reports.push((format!("oci {c:?}"), cudalint::image::scan(&format!("oci:{}", d.display()), &opts).unwrap()));
    }
    let legacy = tmp.path().join("legacy.tar");
    std::fs::write(&legacy, docker_archive_legacy(&Image::new(vec![(layer, Comp::None)]), "t/libs:1")).unwrap();
    reports.push(("docker-archive".into(), cudalint::image::scan(legacy.to_str().unwrap(), &opts).unwrap()));
    let files = |r: &cudalint::image::ImageReport| {
        let mut v = serde_json::to_value(&r.files).unwrap();
        // The layer digest names the blob, which differs with the compression.
        for f in v.as_array_mut().unwrap() {
            f.as_object_mut().unwrap().remove("layer");
        }
        v
    };
    let want = files(&reports[0].1);
    for (name, r) in &reports {
        assert_eq!(files(r), want, "{name} vs {}", reports[0].0);
        assert_eq!(r.files.len(), cases.len(), "{name}");
        for f in &r.files {
            assert_eq!(f.file.containers.len(), 1, "{name}: {}", f.file.path);
            assert!(f.file.all_problems().is_empty(), "{name}: {}: {:?}", f.file.path, f.file.all_problems());
        }
    }
}

/// Tables placed where large real libraries put them (TensorFlow's lld-linked
/// `libtensorflow_cc.so.2`: an 87 MB `.dynstr` and a `.rela.dyn` 98 MiB in, both long before
/// `.dynamic`; torch's patchelf-edited `libtorch_cuda.so`: an 11 MB `.dynstr` appended after
/// `.dynamic`): a library whose exported names fill more than 8 MiB, from each linker, as
/// linked, patched, and with its fatbin section renamed (so the wrapper's relocation decides
/// what is registered). Seek and stream read the same SONAME, DT_NEEDED and module as readelf
/// and the loader, with no problem.
#[test]
fn tables_far_from_the_start_are_read_wherever_the_file_puts_them() {
    let libs = Libs::new();
    // 6,000 names of 1,500 bytes: a `.dynstr` of about 9 MB.
    let long: String =
        (0..6000).map(|i| format!("int big_{}_{i:05}(void) {{ return {i}; }}\n", "x".repeat(1490))).collect();
    std::fs::write(libs.path.join("long.c"), long).unwrap();
    let patchelf = tool("patchelf", "patchelf");
    let objcopy = tool("objcopy", "binutils");
    let readelf = tool("readelf", "binutils");
    for ld in ["bfd", "lld"] {
        let lib = libs.path.join(format!("libbig-{ld}.so"));
        run(Command::new("gcc")
            .current_dir(&libs.path)
            .args(["-shared", "-fPIC", &format!("-fuse-ld={ld}"), &format!("-Wl,-soname,{SONAME}"), "-o"])
            .arg(&lib)
            .args(["lib.c", "long.c"]));
        let patched = libs.derive(&lib, &format!("libbig-{ld}-patched.so"), |p| {
            run(Command::new(&patchelf).args(["--add-needed", "libcudart.so.12"]).arg(p));
        });
        let renamed = libs.derive(&lib, &format!("libbig-{ld}-renamed.so"), |p| {
            run(Command::new(&objcopy).arg("--rename-section").arg(".nv_fatbin=.rodata.blob").arg(p));
        });
        for (what, path) in [("linked", &lib), ("patched", &patched), ("renamed", &renamed)] {
            let what = format!("{ld} {what}");
            // What the loader reads: readelf -d's SONAME and NEEDED, and where the tables are.
            let out = Command::new(&readelf).arg("-dW").arg(path).output().unwrap();
            let dynamic = String::from_utf8_lossy(&out.stdout).into_owned();
            let field = |tag: &str| -> Vec<String> {
                dynamic
                    .lines()
                    .filter(|l| l.contains(&format!("({tag})")))
                    .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_string()))
                    .collect()
            };
            let hex = |tag: &str| -> u64 {
                let l = dynamic.lines().find(|l| l.contains(&format!("({tag})"))).unwrap();
                u64::from_str_radix(l.split_whitespace().last().unwrap().trim_start_matches("0x"), 16).unwrap()
            };
            // The layout this case stands for: a string table of over 8 MiB, and the
            // relocations after it.
            let strsz: u64 = dynamic
                .lines()
                .find(|l| l.contains("(STRSZ)"))
                .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
                .unwrap();
            assert!(strsz > 8 << 20, "{what}: {dynamic}");
            assert!(hex("RELA") > 8 << 20, "{what}: {dynamic}");
            let soname = field("SONAME");
            let needed: Vec<String> = field("NEEDED").into_iter().filter(|n| n.contains("cudart")).collect();
            for opts in [lean(), InspectOptions::default()] {
                let r = both(path, &opts);
                let elf = r.elf.as_ref().unwrap();
                assert_eq!(elf.soname.as_deref(), soname.first().map(String::as_str), "{what}");
                assert_eq!(elf.cuda_needed, needed, "{what}");
                assert_eq!(r.all_problems(), Vec::<String>::new(), "{what}");
                assert_eq!(r.containers.len(), 1, "{what}: {r:#?}");
                assert_eq!(r.containers[0].wrapper_version, Some(1), "{what}");
                assert!(r.hidden_containers.is_empty(), "{what}");
            }
        }
    }
}
