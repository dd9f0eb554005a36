//! OCI index.json / nested image indexes / manifests / configs and docker-archive manifest.json:
//! both resolvers over documents that name each other by digest (see `fuzz_resolve`).
//! Seeds: documents joined by "\n--\n", index.json first.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cudalint::image::oci::fuzz_resolve(data);
});
