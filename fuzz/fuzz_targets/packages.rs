//! Package records (pip RECORD and METADATA, dpkg, conda-meta, wheel variants, os-release, rpm's
//! log) and rpm header blobs: every reader over the same bytes (see `fuzz_records`). Seeds: any
//! record file, or a header blob from an rpmdb's Packages table.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cudalint::packages::fuzz_records(data);
});
