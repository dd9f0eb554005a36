//! `ar` archives (static libraries), read member by member: each member is inspected like a
//! file of its own, named `archive.a:member.o` as cuobjdump names it.

use std::io;

use super::model::{FileFormat, FileReport};
use super::{InspectOptions, inspect_member};
use crate::input::{Input, SubInput, read_full};

const HEADER: usize = 60;
/// GNU long-name table bound (real ones are kilobytes).
const MAX_NAMES: u64 = 16 << 20;

pub fn inspect(input: &mut dyn Input, path: &str, opts: &InspectOptions, depth: u32) -> io::Result<FileReport> {
    let len = input.len();
    let mut report = FileReport::new(path.to_string(), len, FileFormat::Archive);
    let mut magic = [0u8; 8];
    read_full(input, &mut magic)?;
    if &magic == b"!<thin>\n" {
        report.problem(Some(0), "thin archive: its members are separate files, not stored in it");
        return Ok(report);
    }
    let mut long_names: Vec<u8> = Vec::new();
    let mut pos = 8u64;
    while pos + HEADER as u64 <= len {
        input.skip_to(pos)?;
        let mut h = [0u8; HEADER];
        if read_full(input, &mut h)? < HEADER {
            break;
        }
        if &h[58..60] != b"`\n" {
            report.problem(Some(pos), "bad archive member header (no terminator): stopped reading the archive");
            break;
        }
        let field = |a: usize, b: usize| String::from_utf8_lossy(&h[a..b]).trim_end().to_string();
        let Ok(size) = field(48, 58).parse::<u64>() else {
            report.problem(Some(pos), "archive member size is not a number: stopped reading the archive");
            break;
        };
        let mut data = pos + HEADER as u64;
        let mut dlen = size;
        let end = data.saturating_add(size);
        if end > len {
            report.problem(Some(pos), format!("archive member of {size} bytes runs past the end of the archive"));
        }
        let raw_name = field(0, 16);
        let name = if raw_name == "/" || raw_name == "/SYM64/" || raw_name == "__.SYMDEF" {
            None
        } else if raw_name == "//" {
            if size <= MAX_NAMES && end <= len {
                long_names = vec![0; size as usize];
                read_full(input, &mut long_names)?;
            }
            None
        } else if let Some(idx) = raw_name.strip_prefix('/').and_then(|i| i.parse::<usize>().ok()) {
            let s = long_names.get(idx..).unwrap_or(&[]);
            let e = s.iter().position(|&b| b == b'\n').unwrap_or(s.len());
            Some(String::from_utf8_lossy(&s[..e]).trim_end_matches('/').to_string())
        } else if let Some(n) = raw_name.strip_prefix("#1/").and_then(|n| n.parse::<u64>().ok()) {
            // BSD: the name follows the header and counts towards the size.
            let n = n.min(size).min(4096);
            let mut nb = vec![0; n as usize];
            read_full(input, &mut nb)?;
            data += n;
            dlen -= n;
            Some(String::from_utf8_lossy(&nb).trim_end_matches('\0').to_string())
        } else {
            Some(raw_name.trim_end_matches('/').to_string())
        };
        if let Some(name) = name {
            let mut sub = SubInput::new(input, data, dlen)?;
            let member = inspect_member(&mut sub, &format!("{path}:{name}"), opts, depth)?;
            report.members.push(member);
        }
        pos = end.saturating_add(end & 1);
    }
    Ok(report)
}
