//! Fatbin headers and cubins: the container walker (through a one-container "file"), the
//! concatenated-entry table, `.nv.compat` records, and the cubin parser on the same bytes.
#![no_main]

use cudalint::inspect::{cubin, fatbin};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(e) = fatbin::parse_entry_base(data) {
        let _ = (e.plausible(), e.compression(), e.suffix(), e.host());
        let _ = fatbin::header_string(data, e.identifier_offset, e.identifier_len);
        let _ = fatbin::options_slot(data, e.options_offset);
        let _ = fatbin::concatenated_table(data);
    }
    let _ = cubin::compat_attr(data, 0x09);
    let _ = cubin::parse(&mut &data[..], true);
    let _ = cubin::extent_from_header(data);
});
