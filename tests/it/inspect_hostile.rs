//! Damaged and hostile input: a clear problem naming what is wrong, never a panic, never an
//! unbounded allocation, never a silent "no device code".

use cudalint::input::{SliceInput, StreamInput};
use cudalint::inspect::{FileReport, InspectOptions, inspect_file, inspect_input};
use proptest::prelude::*;

use crate::util::{fixture, read_fixture};

/// All problem messages in a report, nested ones included.
fn messages(r: &FileReport) -> Vec<String> {
    let mut v: Vec<String> = r.problems.iter().map(|p| p.message.clone()).collect();
    for c in r.containers.iter().chain(&r.hidden_containers) {
        v.extend(c.problems.iter().map(|p| p.message.clone()));
        for e in c.entries.iter().chain(c.entries.iter().flat_map(|e| &e.images)) {
            v.extend(e.problems.iter().map(|p| p.message.clone()));
            v.extend(e.cubin.iter().flat_map(|c| c.problems.clone()));
        }
    }
    v.extend(r.cubin.iter().flat_map(|c| c.problems.clone()));
    for m in &r.members {
        v.extend(messages(m));
    }
    v
}

fn assert_problem(name: &str, needle: &str) -> FileReport {
    assert_problem_with(name, needle, &InspectOptions::default())
}

fn assert_problem_with(name: &str, needle: &str, opts: &InspectOptions) -> FileReport {
    let r = inspect_file(&fixture(name), opts).unwrap();
    let m = messages(&r);
    assert!(m.iter().any(|m| m.contains(needle)), "{name}: no problem mentioning {needle:?} in {m:?}");
    r
}

#[test]
fn truncated_library_keeps_what_is_readable_and_says_it_is_cut() {
    let r = assert_problem("damaged-truncated.so", "past the end of the file");
    // cuobjdump says this file has no device code; the first containers are intact.
    assert!(crate::cuobjdump::load("damaged-truncated.so").messages[0].contains("does not contain device code"));
    // The section table and the wrappers are cut off: nothing shows the modules are registered,
    // so they are listed as hidden (and the file carries problems and a CUDA sign).
    assert!(r.containers.is_empty());
    assert!(r.hidden_containers.len() >= 2);
    assert!(r.hidden_containers[0].kernel_less());
    assert!(r.hidden_containers.last().unwrap().problem_count() > 0);
    assert!(r.cuda_sign && !r.all_problems().is_empty());
}

#[test]
fn decompression_bombs_stop_at_the_declared_size() {
    let r = assert_problem("damaged-bomb.fatbin", "decodes to more than");
    assert_eq!(r.containers.len(), 2);
    // By default a 4 GiB image is not even tried (kernels assumed); asked to, it is refused.
    assert_eq!(r.containers[1].kernels, cudalint::inspect::Kernels::Assumed);
    let every = InspectOptions { every_cubin: true, ..Default::default() };
    assert_problem_with("damaged-bomb.fatbin", "exceeds the", &every);
}

#[test]
fn each_damage_is_named() {
    assert_problem("damaged-header-size.fatbin", "invalid entry header");
    assert_problem("damaged-payload-size.fatbin", "runs past the container end");
    assert_problem("damaged-fat-size.fatbin", "past the end of the file");
    assert_problem("damaged-zstd.fatbin", "ZSTD frame does not decode");
    assert_problem("damaged-garbage.so", "section table");
    let r = assert_problem("damaged-shoff.cubin", "lies outside the cubin");
    // Unreadable symbols mean "unknown", never "no kernels" (which would hide a module).
    assert_eq!(r.cubin.unwrap().kernel_count, None);
}

#[test]
fn empty_and_tiny_files() {
    for bytes in [&b""[..], b"\x7fELF", b"\x50\xed\x55\xba\x01\x00\x10\x00", b"!<arch>\n", b"!<arch>\nshort"] {
        let mut input = SliceInput::new(bytes);
        let r = inspect_input(&mut input, "tiny", &InspectOptions::default()).unwrap();
        assert!(r.containers.is_empty());
    }
}

fn mutate_and_inspect(base: &[u8], edits: &[(usize, u8)], cut: usize) {
    let mut data = base.to_vec();
    for &(i, v) in edits {
        let n = data.len();
        data[i % n] = v;
    }
    data.truncate(data.len() - cut % data.len().max(1));
    let opts = InspectOptions { every_cubin: true, kernel_names: true, ..Default::default() };
    let mut a = SliceInput::new(&data);
    let ra = inspect_input(&mut a, "mutant", &opts).unwrap();
    let mut b = StreamInput::new(&data[..], data.len() as u64);
    let rb = inspect_input(&mut b, "mutant", &opts).unwrap();
    let _ = serde_json::to_string(&ra).unwrap();
    let _ = serde_json::to_string(&rb).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn mutated_fixtures_never_panic(
        which in 0usize..6,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..24),
        cut in any::<usize>(),
    ) {
        let name = ["libconcat.so", "lz4.fatbin", "libdebug.so", "libstatic.a", "abi8_sm100f.cubin", "libhidden.so"][which];
        let base = read_fixture(name);
        mutate_and_inspect(&base, &edits, if cut % 4 == 0 { cut } else { 0 });
    }
}

/// Mutations aimed at header fields (the bytes a parser trusts), on the fatbin fixtures.
#[test]
fn every_header_byte_of_a_fatbin_mutated() {
    for name in ["vecadd.fatbin", "lz4.fatbin", "zstd-all.fatbin"] {
        let base = read_fixture(name);
        for i in 0..0x100.min(base.len()) {
            for v in [0x00, 0x7F, 0xFF] {
                mutate_and_inspect(&base, &[(i, v)], 0);
            }
        }
    }
}

/// Found by the fuzzer: program headers said to start near the end of the address space.
#[test]
fn program_headers_at_a_wrapping_offset() {
    let mut elf = read_fixture("libplain.so");
    elf[0x20..0x28].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    for stream in [false, true] {
        let r = if stream {
            inspect_input(&mut StreamInput::new(&elf[..], elf.len() as u64), "x.so", &InspectOptions::default())
        } else {
            inspect_input(&mut SliceInput::new(&elf), "x.so", &InspectOptions::default())
        }
        .unwrap();
        assert!(!r.all_problems().is_empty(), "{r:?}");
    }
}
