//! cudalint's listing of every fixture against NVIDIA's cuobjdump, entry by entry, and the
//! facts cuobjdump is blind to (hidden containers, sm_35, stubs) against the files NVIDIA's
//! tools produced them from.

use cudalint::input::{FileInput, Input, StreamInput};
use cudalint::inspect::fatbin::{Compression, EntryKind, Host, Suffix};
use cudalint::inspect::{Entry, FileReport, InspectOptions, inspect_file, inspect_input};

use crate::cuobjdump::{self, DumpEntry};
use crate::util::{fixture, fixture_names, read_fixture};

fn inspect(name: &str) -> FileReport {
    inspect_file(&fixture(name), &InspectOptions { every_cubin: true, ..Default::default() }).unwrap()
}

/// Our section-container entries in the order cuobjdump prints them (archive members in
/// turn, concatenated images after their entry).
fn flatten(r: &FileReport) -> Vec<(Option<String>, bool, &Entry)> {
    let mut out = Vec::new();
    let member = r.path.contains(':').then(|| r.path.rsplit('/').next().unwrap().to_string());
    for c in &r.containers {
        for e in &c.entries {
            out.push((member.clone(), false, e));
            for i in &e.images {
                out.push((member.clone(), true, i));
            }
        }
    }
    for m in &r.members {
        out.extend(flatten(m));
    }
    out
}

fn dump_kind(k: EntryKind) -> &'static str {
    match k {
        EntryKind::Elf => "elf",
        EntryKind::Ptx => "ptx",
        EntryKind::Nvvm => "nvvm",
        EntryKind::TileIr => "tile ir",
        EntryKind::Concatenated => "concatenated entry",
        _ => "?",
    }
}

fn assert_entry(name: &str, i: usize, ours: &Entry, nested: bool, d: &DumpEntry) {
    let ctx = format!("{name} entry {i}: ours {ours:?}\ncuobjdump {d:?}");
    assert_eq!(dump_kind(ours.kind), d.kind, "kind, {ctx}");
    assert_eq!(nested, d.nested, "nesting, {ctx}");
    let arch = (ours.kind != EntryKind::Concatenated).then(|| format!("sm_{}{}", ours.sm, ours.suffix.as_str()));
    assert_eq!(arch, d.arch, "arch, {ctx}");
    assert_eq!(Some(ours.code_version), d.code_version, "code version, {ctx}");
    assert_eq!(ours.host == Host::Linux, d.host.as_deref() == Some("linux"), "host, {ctx}");
    assert_eq!(ours.bits64, d.bits64, "compile size, {ctx}");
    assert_eq!(ours.debug, d.debug, "debug, {ctx}");
    assert_eq!(ours.compression != Compression::None, d.compressed, "compressed, {ctx}");
    assert_eq!(ours.identifier, d.identifier, "identifier, {ctx}");
    if ours.kind == EntryKind::Ptx {
        assert_eq!(
            ours.options.clone().unwrap_or_default(),
            d.ptxas_options.clone().unwrap_or_default(),
            "options, {ctx}"
        );
    }
    if let Some(k) = d.kernels {
        let c = ours.cubin.as_ref().unwrap_or_else(|| panic!("cubin not decoded, {ctx}"));
        assert_eq!(c.kernel_count, Some(k), "kernels, {ctx}");
        // Two fields NVIDIA's tools wrote independently: the header's code version is the
        // cubin's ELF ABI version, and the header's SM is the one in e_flags.
        assert_eq!(u16::from(c.abi_version), ours.code_version[1], "ABI, {ctx}");
        assert_eq!(c.sm, ours.sm, "e_flags SM, {ctx}");
    }
}

/// Fixtures whose cuobjdump listing has entries and that it read without error.
fn listed_fixtures() -> Vec<String> {
    fixture_names()
        .into_iter()
        .filter(|n| {
            let d = cuobjdump::load(n);
            d.exit_code == 0 && d.entries.iter().any(|e| e.kind != "cubin")
        })
        .collect()
}

#[test]
fn every_listed_fixture_matches_cuobjdump_entry_by_entry() {
    let names = listed_fixtures();
    assert!(names.len() >= 12, "expected the fatbin-bearing fixtures, got {names:?}");
    for name in &names {
        let r = inspect(name);
        assert_eq!(r.problem_count(), 0, "{name}: {:?}", r.problems);
        let dump = cuobjdump::load(name);
        let ours = flatten(&r);
        assert_eq!(ours.len(), dump.entries.len(), "{name}: entry count");
        for (i, ((member, nested, e), d)) in ours.iter().zip(&dump.entries).enumerate() {
            assert_eq!(member, &d.member, "{name} entry {i}: archive member");
            assert_entry(name, i, e, *nested, d);
        }
    }
}

#[test]
fn elf_and_ptx_lists_match_cuobjdump() {
    for name in listed_fixtures() {
        let r = inspect(&name);
        let list = cuobjdump::load_list(&name);
        let mut ours: Vec<(String, String)> = Vec::new();
        for (_, _, e) in flatten(&r) {
            match e.kind {
                // --list-elf names a cubin from its own bytes, where 'f' is not recorded (doc §1.6).
                EntryKind::Elf => {
                    ours.push(("ELF".into(), format!("sm_{}{}", e.sm, e.suffix.as_str().replace('f', ""))))
                }
                EntryKind::Ptx => ours.push(("PTX".into(), format!("sm_{}{}", e.sm, e.suffix.as_str()))),
                _ => {}
            }
        }
        assert_eq!(ours, list, "{name}");
    }
}

#[test]
fn kernel_less_device_link_stubs_are_marked_and_only_they() {
    let mut stubs = 0;
    for name in listed_fixtures() {
        let r = inspect(&name);
        let dump = cuobjdump::load(&name);
        let mut d = dump.entries.iter().filter(|e| !e.nested || e.kind != "concatenated entry");
        for c in r.containers.iter().chain(r.members.iter().flat_map(|m| &m.containers)) {
            let mine: Vec<&DumpEntry> =
                c.entries.iter().flat_map(|e| std::iter::once(e).chain(&e.images)).map(|_| d.next().unwrap()).collect();
            // PTX comes from the same translation unit as the cubins beside it: it has `.entry`
            // directives exactly when they have ENTRY symbols.
            let elf: Vec<&&DumpEntry> = mine.iter().filter(|e| e.kind == "elf").collect();
            let expect = !elf.is_empty() && elf.iter().all(|e| e.kernels == Some(0));
            assert_eq!(c.kernel_less(), expect, "{name} container @{:#x}", c.offset);
            stubs += usize::from(expect);
        }
    }
    assert!(stubs >= 6, "fixtures built by nvcc -shared carry stub containers; saw {stubs}");
}

#[test]
fn device_link_stub_is_registered_by_a_version_2_wrapper() {
    for name in ["libmulti.so", "libsm90a.so", "librdc.so"] {
        let r = inspect(name);
        let first = &r.containers[0];
        assert_eq!(first.wrapper_version, Some(2), "{name}");
        assert!(r.containers[1..].iter().all(|c| c.wrapper_version != Some(2)), "{name}");
    }
}

#[test]
fn relocatable_containers_come_from_nv_relfatbin() {
    let r = inspect("librdc.so");
    let secs: Vec<(&str, bool)> = r.containers.iter().map(|c| (c.section.as_deref().unwrap(), c.relocatable)).collect();
    assert_eq!(secs, [(".nv_fatbin", false), ("__nv_relfatbin", true), ("__nv_relfatbin", true)]);
    let rel: Vec<&str> = r.containers[1..]
        .iter()
        .flat_map(|c| &c.entries)
        .filter_map(|e| e.cubin.as_ref())
        .map(|c| c.elf_type.as_str())
        .collect();
    assert_eq!(rel, ["rel", "rel"]);
}

#[test]
fn hidden_containers_equal_the_fatbins_bin2c_embedded() {
    // cuobjdump is blind here: it only reads .nv_fatbin.
    let dump = cuobjdump::load("libhidden.so");
    assert!(dump.messages.iter().any(|m| m.contains("does not contain device code")), "{:?}", dump.messages);
    let r = inspect("libhidden.so");
    assert!(r.containers.is_empty());
    let got: Vec<&str> = r.hidden_containers.iter().map(|c| c.section.as_deref().unwrap()).collect();
    assert_eq!(got, [".rodata", ".cask_resource", ".lrodata"]);
    for (c, src) in
        r.hidden_containers.iter().zip(["hidden_rodata.fatbin", "hidden_cask.fatbin", "hidden_lrodata.fatbin"])
    {
        let src = format!("libhidden.{src}");
        let d = cuobjdump::load(&src);
        assert_eq!(c.entries.len(), d.entries.len(), "{src}");
        for (i, (e, de)) in c.entries.iter().zip(&d.entries).enumerate() {
            assert_entry(&src, i, e, false, de);
        }
        // The bytes at that offset are the embedded file, byte for byte.
        let lib = read_fixture("libhidden.so");
        let emb = read_fixture(&src);
        assert_eq!(&lib[c.offset as usize..c.offset as usize + emb.len()], &emb[..], "{src}");
    }
    assert_eq!(r.hidden_cubins.len(), 1);
    let h = &r.hidden_cubins[0];
    let d = cuobjdump::load("libhidden.hidden_sm86.cubin");
    assert_eq!(h.cubin.kernel_count, d.entries[0].kernels);
    assert_eq!(cuobjdump::load_list("libhidden.hidden_sm86.cubin"), [("ELF".to_string(), h.cubin.arch())]);
    assert_eq!(h.section.as_deref(), Some(".rodata"));
}

#[test]
fn bare_cubins_match_cuobjdump_and_say_what_it_cannot() {
    for name in fixture_names().iter().filter(|n| n.ends_with(".cubin") && !n.starts_with("damaged")) {
        let r = inspect(name);
        let c = r.cubin.as_ref().unwrap_or_else(|| panic!("{name}: {:?}", r.problems));
        let dump = cuobjdump::load(name);
        if name == "abi7_sm35.cubin" {
            // cuobjdump 13.5 refuses sm_35 outright; the file is what ptxas 11.8 wrote for sm_35.
            assert_eq!(dump.exit_code, 1);
            assert!(dump.messages[0].contains("Support for 'sm_35' has been removed"));
            assert_eq!((c.sm, c.abi_version, c.osabi), (35, 7, 0x33));
            assert_eq!(c.kernel_count, Some(2), "vecadd.cu has two kernels");
            continue;
        }
        assert_eq!(dump.exit_code, 0, "{name}");
        assert_eq!(c.kernel_count, dump.entries[0].kernels, "{name}");
        let list = cuobjdump::load_list(name);
        // cuobjdump names a bare sm_100f cubin sm_100; only ptxas's recorded options carry 'f'.
        assert_eq!(list, [("ELF".to_string(), c.arch().replace('f', ""))], "{name}");
    }
}

#[test]
fn abi_layouts_and_suffix_evidence() {
    let get = |n: &str| inspect(n).cubin.unwrap();
    // ABI 7 (ptxas 12.9 below sm_100): SM in the low byte, 'a' in bit 11.
    let c = get("abi7_sm90a.cubin");
    assert_eq!((c.abi_version, c.osabi, c.sm, c.suffix), (7, 0x33, 90, Suffix::A));
    // ABI 8 from ptxas 12.9: 'a' in bit 3 of e_flags.
    let c = get("abi8_sm100a_cu129.cubin");
    assert_eq!((c.abi_version, c.osabi, c.sm, c.suffix), (8, 0x41, 100, Suffix::A));
    assert_eq!(c.toolkit.as_deref(), Some("12.9"));
    // ABI 8 from ptxas 13.5: 'a' only in .nv.compat, 'f' only in the tkinfo options.
    let c = get("abi8_sm90a.cubin");
    assert_eq!((c.abi_version, c.sm, c.suffix), (8, 90, Suffix::A));
    let c = get("abi8_sm100f.cubin");
    assert_eq!((c.sm, c.suffix), (100, Suffix::F));
    assert_eq!(c.ptxas_options.as_deref().map(str::trim), Some("-arch sm_100f"));
    let c = get("abi8_sm120.cubin");
    assert_eq!((c.sm, c.suffix, c.toolkit.as_deref()), (120, Suffix::None, Some("13.5")));
}

fn tool_version(prefix: &str) -> String {
    let tools = std::fs::read_to_string(fixture("TOOL-VERSIONS.txt")).unwrap();
    let line = tools.lines().find(|l| l.contains(prefix)).unwrap();
    line.split("release ").nth(1).unwrap().split(',').next().unwrap().to_string()
}

#[test]
fn static_cudart_version_is_the_toolkit_that_linked_it() {
    let r = inspect("libmulti.so");
    let c = r.cudart.unwrap();
    assert_eq!(
        (c.version.as_str(), c.linkage.as_str(), c.source.as_str()),
        (tool_version("V13.5").as_str(), "static", "machine-code")
    );
    // Libraries linked with -cudart shared carry no static runtime, and name it in DT_NEEDED.
    let r = inspect("libsm90a.so");
    assert_eq!(r.cudart, None);
    assert_eq!(r.elf.unwrap().cuda_needed, ["libcudart.so.13"]);
}

#[test]
fn ptx_file() {
    let r = inspect("vecadd.ptx");
    let p = r.ptx.unwrap();
    let text = String::from_utf8(read_fixture("vecadd.ptx")).unwrap();
    assert_eq!(p.target, "sm_80");
    assert!(text.contains(&format!(".version {}.{}", p.version[0], p.version[1])));
    assert_eq!(p.entry_count as usize, text.matches(".entry ").count());
    assert_eq!(p.entry_count, 2);
}

/// Reading a file as a stream (as inside a compressed layer) gives the same report as reading
/// it with seeks.
#[test]
fn streaming_and_seekable_reads_agree_on_every_fixture() {
    let opts = InspectOptions { every_cubin: true, kernel_names: true, ..Default::default() };
    for name in fixture_names() {
        let path = fixture(&name);
        let file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let mut seek = FileInput::new(&file, 0, len);
        let a = inspect_input(&mut seek, &name, &opts).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut stream = StreamInput::new(&bytes[..], len);
        let b = inspect_input(&mut stream, &name, &opts).unwrap();
        let (ja, jb) = (serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
        if name.starts_with("damaged") {
            // Damage is found either way; messages may differ in where it was noticed.
            assert_eq!(a.containers.len(), b.containers.len(), "{name}");
            continue;
        }
        assert_eq!(ja, jb, "{name}");
    }
}

#[test]
fn seekable_read_skips_payloads_it_does_not_need() {
    let file = std::fs::File::open(fixture("libmulti.so")).unwrap();
    let len = file.metadata().unwrap().len();
    let mut input = FileInput::new(&file, 0, len);
    inspect_input(&mut input, "libmulti.so", &InspectOptions::default()).unwrap();
    // The library is mostly host code and debug-free cudart; the scan reads loaded sections only.
    assert!(input.bytes_read() < len, "read {} of {len}", input.bytes_read());
}
