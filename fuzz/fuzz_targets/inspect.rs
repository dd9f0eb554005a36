//! The whole inspector on arbitrary bytes, read both ways: seekable (slice) and streamed.
//! Seeds: fixtures/bin (host ELF, cubins, fatbins, archives, PTX).
#![no_main]

use cudalint::input::{SliceInput, StreamInput};
use cudalint::inspect::{InspectOptions, inspect_input};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Default mode seekable, every-cubin mode streamed: both read paths, both probe policies.
    let mut a = SliceInput::new(data);
    let _ = inspect_input(&mut a, "fuzz", &InspectOptions::default());
    let every = InspectOptions { every_cubin: true, kernel_names: true, ..Default::default() };
    let mut b = StreamInput::new(data, data.len() as u64);
    let _ = inspect_input(&mut b, "fuzz", &every);
    // Lean (image scans), both ways: the section-name watch, relocations, segment reach.
    let lean = InspectOptions { lean: true, ..Default::default() };
    for r in [
        inspect_input(&mut SliceInput::new(data), "fuzz.so", &lean),
        inspect_input(&mut StreamInput::new(data, data.len() as u64), "fuzz.so", &lean),
    ] {
        if let Ok(r) = r {
            let _ = r.all_problems();
        }
    }
});
