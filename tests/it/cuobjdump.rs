//! Reads the listings NVIDIA's cuobjdump 13.5 wrote beside each fixture
//! (scripts/build-fixtures.sh): `cuobjdump -all -symbols` and `cuobjdump -all -lelf -lptx`.

use crate::util::root;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpEntry {
    /// `elf`, `ptx`, `nvvm`, `concatenated entry`, ...
    pub kind: String,
    pub arch: Option<String>,
    pub code_version: Option<[u16; 2]>,
    pub host: Option<String>,
    pub bits64: bool,
    pub debug: bool,
    pub compressed: bool,
    pub identifier: Option<String>,
    pub ptxas_options: Option<String>,
    /// `FUNC ... ENTRY` symbols: kernels. None when no `symbols:` block was printed.
    pub kernels: Option<u32>,
    /// Nested under a concatenated entry.
    pub nested: bool,
    /// `member a.a:b.o` group it belongs to, for archives.
    pub member: Option<String>,
}

#[derive(Debug, Default)]
pub struct Dump {
    pub entries: Vec<DumpEntry>,
    /// `cuobjdump fatal/info ...` lines.
    pub messages: Vec<String>,
    pub exit_code: i32,
}

pub fn load(fixture: &str) -> Dump {
    let dir = root().join("fixtures/bin");
    let text = std::fs::read_to_string(dir.join(format!("{fixture}.cuobjdump.txt")))
        .unwrap_or_else(|e| panic!("{fixture}.cuobjdump.txt: {e} (run scripts/build-fixtures.sh)"));
    let exit_code = std::fs::read_to_string(dir.join(format!("{fixture}.cuobjdump.rc")))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0);
    let mut d = parse(&text);
    d.exit_code = exit_code;
    d
}

pub fn parse(text: &str) -> Dump {
    let mut dump = Dump::default();
    let mut member = None;
    let mut in_symbols = false;
    for raw in text.lines() {
        let nested = raw.starts_with('\t');
        let line = raw.trim();
        if line.starts_with("cuobjdump ") {
            dump.messages.push(line.to_string());
            continue;
        }
        if let Some(m) = line.strip_prefix("member ") {
            member = Some(m.trim_end_matches(':').to_string());
            continue;
        }
        if let Some(kind) = line.strip_prefix("Fatbin ").and_then(|l| l.strip_suffix(" code:")) {
            in_symbols = false;
            dump.entries.push(DumpEntry {
                kind: kind.to_string(),
                nested,
                member: member.clone(),
                ..Default::default()
            });
            continue;
        }
        if dump.entries.is_empty() && line == "symbols:" {
            // A bare cubin: cuobjdump prints its symbols without an entry header.
            dump.entries.push(DumpEntry { kind: "cubin".into(), ..Default::default() });
        }
        let Some(e) = dump.entries.last_mut() else { continue };
        if line == "symbols:" {
            in_symbols = true;
            e.kernels = Some(0);
        } else if in_symbols {
            if line.starts_with("FUNC") && line.split_whitespace().nth(3) == Some("ENTRY") {
                *e.kernels.as_mut().unwrap() += 1;
            }
            if line.is_empty() {
                in_symbols = false;
            }
        } else if let Some(v) = line.strip_prefix("arch = ") {
            e.arch = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("code version = [") {
            let (a, b) = v.trim_end_matches(']').split_once(',').unwrap();
            e.code_version = Some([a.parse().unwrap(), b.parse().unwrap()]);
        } else if let Some(v) = line.strip_prefix("host = ") {
            e.host = Some(v.to_string());
        } else if line == "compile_size = 64bit" {
            e.bits64 = true;
        } else if line == "has debug info" {
            e.debug = true;
        } else if line == "compressed" {
            e.compressed = true;
        } else if let Some(v) = raw.trim_start_matches('\t').strip_prefix("identifier = ") {
            e.identifier = Some(v.to_string());
        } else if let Some(v) = raw.trim_start_matches('\t').strip_prefix("ptxasOptions = ") {
            e.ptxas_options = Some(v.to_string());
        }
    }
    dump
}

/// `--list-elf --list-ptx` lines: (`ELF`|`PTX`, arch from the file name cuobjdump makes up).
pub fn load_list(fixture: &str) -> Vec<(String, String)> {
    parse_list(&std::fs::read_to_string(root().join(format!("fixtures/bin/{fixture}.list.txt"))).unwrap())
}

/// The same, of a listing cuobjdump has just written.
pub fn parse_list(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (kind, rest) = l.split_once(" file ")?;
            let name = rest.split_once(": ")?.1;
            let parts: Vec<&str> = name.rsplitn(3, '.').collect();
            Some((kind.to_string(), parts.get(1)?.to_string()))
        })
        .collect()
}
