//! Generated host ELF layouts: where the section name table, large string tables and the
//! section table sit varies between linkers (GNU ld: names just before the section table at the
//! end; lld: names before a large `.strtab`; others: the table first). A stream must find the
//! same as a seek whatever the order.

use cudalint::input::{SliceInput, StreamInput};
use cudalint::inspect::{InspectOptions, inspect_input};
use proptest::prelude::*;

use crate::util::read_fixture;

const SHT_PROGBITS: u32 = 1;
const SHT_STRTAB: u32 = 3;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;

struct Sec {
    name: &'static str,
    sh_type: u32,
    flags: u64,
    data: Vec<u8>,
}

fn put(v: &mut Vec<u8>, at: usize, b: &[u8]) {
    if v.len() < at + b.len() {
        v.resize(at + b.len(), 0);
    }
    v[at..at + b.len()].copy_from_slice(b);
}

fn align(v: &mut Vec<u8>, to: usize) {
    v.resize(v.len().next_multiple_of(to), 0);
}

/// An ELF64 shared object: one PT_LOAD over the header, `.nv_fatbin` (the committed
/// `vecadd.fatbin`) and a `.nvFatBinSegment` wrapper pointing at it; then the unloaded
/// sections in `order`, the section table inserted before unloaded section `shdr_at`.
fn build(order: &[usize], shdr_at: usize, symtab: usize, strtab: usize, decoys: usize) -> Vec<u8> {
    let fatbin = read_fixture("vecadd.fatbin");
    let mut f = vec![0u8; 64 + 56];
    align(&mut f, 8);
    let fat_off = f.len();
    f.extend_from_slice(&fatbin);
    align(&mut f, 8);
    let wrap_off = f.len();
    let mut wrapper = Vec::new();
    wrapper.extend_from_slice(&0x466243b1u32.to_le_bytes());
    wrapper.extend_from_slice(&1u32.to_le_bytes());
    wrapper.extend_from_slice(&(fat_off as u64).to_le_bytes());
    wrapper.extend_from_slice(&0u64.to_le_bytes());
    f.extend_from_slice(&wrapper);
    let load_end = f.len();

    // Unloaded: a symbol-table-sized filler, a large string table (with names that look like
    // the section name table's), the section name table itself.
    let mut names = vec![0u8];
    let mut strings = vec![0u8];
    for i in 0..strtab / 24 {
        strings.extend_from_slice(format!("symbol_name_{i:011}\0").as_bytes());
        if i % 1000 == 7 && decoys > i / 1000 {
            strings.extend_from_slice(b".shstrtab\0");
        }
    }
    let mut secs = [
        Sec { name: ".symtab", sh_type: SHT_PROGBITS, flags: 0, data: (0..symtab).map(|i| (i * 7) as u8).collect() },
        Sec { name: ".strtab", sh_type: SHT_STRTAB, flags: 0, data: strings },
        Sec { name: ".shstrtab", sh_type: SHT_STRTAB, flags: 0, data: Vec::new() },
    ];
    let all: Vec<&str> = [".nv_fatbin", ".nvFatBinSegment"].into_iter().chain(secs.iter().map(|s| s.name)).collect();
    let mut name_at = Vec::new();
    for n in &all {
        name_at.push(names.len() as u32);
        names.extend_from_slice(n.as_bytes());
        names.push(0);
    }
    secs[2].data = names;

    let shnum = 1 + all.len();
    let mut shoff = 0;
    let mut placed = [(0usize, 0usize); 3];
    for (k, &i) in order.iter().enumerate() {
        if k == shdr_at {
            align(&mut f, 8);
            shoff = f.len();
            f.resize(f.len() + shnum * 64, 0);
        }
        placed[i] = (f.len(), secs[i].data.len());
        f.extend_from_slice(&secs[i].data);
    }
    if shdr_at >= order.len() {
        align(&mut f, 8);
        shoff = f.len();
        f.resize(f.len() + shnum * 64, 0);
    }

    // ELF header: ET_DYN, x86-64, one program header, the section table, e_shstrndx.
    let mut h = Vec::new();
    h.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    h.extend_from_slice(&3u16.to_le_bytes());
    h.extend_from_slice(&62u16.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes());
    h.extend_from_slice(&64u64.to_le_bytes());
    h.extend_from_slice(&(shoff as u64).to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, shnum as u16, shnum as u16 - 1] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    put(&mut f, 0, &h);
    // PT_LOAD, read+write, offset 0 = vaddr 0.
    let mut p = Vec::new();
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&6u32.to_le_bytes());
    for v in [0u64, 0, 0, load_end as u64, load_end as u64, 0x1000] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    put(&mut f, 64, &p);

    let mut shdr = |i: usize, name: u32, sh_type: u32, flags: u64, off: usize, size: usize, addr: u64| {
        let mut s = Vec::new();
        s.extend_from_slice(&name.to_le_bytes());
        s.extend_from_slice(&sh_type.to_le_bytes());
        for v in [flags, addr, off as u64, size as u64, 0, 8, 0] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        s.truncate(64);
        put(&mut f, shoff + i * 64, &s);
    };
    shdr(1, name_at[0], SHT_PROGBITS, SHF_ALLOC, fat_off, fatbin.len(), fat_off as u64);
    shdr(2, name_at[1], SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, wrap_off, wrapper.len(), wrap_off as u64);
    for (i, s) in secs.iter().enumerate() {
        shdr(3 + i, name_at[2 + i], s.sh_type, s.flags, placed[i].0, placed[i].1, 0);
    }
    f
}

fn orders() -> impl Strategy<Value = Vec<usize>> {
    Just(vec![0usize, 1, 2]).prop_shuffle()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn stream_and_seek_agree_on_any_section_layout(
        order in orders(),
        shdr_at in 0usize..4,
        symtab in 0usize..200_000,
        strtab in 0usize..300_000,
        decoys in 0usize..3,
        lean in any::<bool>(),
    ) {
        let elf = build(&order, shdr_at, symtab, strtab, decoys);
        let opts = InspectOptions { lean, ..Default::default() };
        let a = inspect_input(&mut SliceInput::new(&elf), "lib.so", &opts).unwrap();
        let b = inspect_input(&mut StreamInput::new(&elf[..], elf.len() as u64), "lib.so", &opts).unwrap();
        prop_assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
        prop_assert_eq!(a.containers.len(), 1);
        prop_assert_eq!(a.containers[0].section.as_deref(), Some(".nv_fatbin"));
        prop_assert_eq!(a.containers[0].wrapper_version, Some(1));
        prop_assert_eq!(a.all_problems(), Vec::<String>::new());
    }
}
