//! Tar layer parsing on arbitrary bytes: the walker (long names, PAX records, GNU sparse maps
//! of every format) read seekable and streamed must list the same entries, with the same
//! contents for sparse files; then the layer analysis both ways, and a merge.
//! Seeds: tars written by GNU tar (`--format=gnu|posix`, `--sparse --sparse-version=0.0|0.1|1.0`).
#![no_main]

use cudalint::input::{Input, SliceInput, StreamInput, read_full};
use cudalint::inspect::InspectOptions;
use cudalint::layer::analyze::analyze;
use cudalint::layer::merge::merge;
use cudalint::layer::sparse::SparseInput;
use cudalint::layer::tar::{Kind, TarWalker};
use libfuzzer_sys::fuzz_target;

/// Bytes of each sparse file read back (holes cost nothing, but a map may claim exabytes).
const READ_BACK: u64 = 1 << 16;

/// (path, kind, size, map, first bytes of a sparse file) of every entry, then the error if any.
fn walk(input: &mut dyn Input) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut walker = TarWalker::new(input);
    loop {
        match walker.next_entry() {
            Ok(Some(e)) => {
                let mut line = format!("{:?} {:?} {} {:?}", e.path, e.kind, e.size, e.sparse);
                if e.kind == Kind::Sparse {
                    let map = e.sparse.as_deref().expect("a sparse entry has a map");
                    let Ok(mut s) = SparseInput::new(walker.input(), e.data_offset, map, e.size) else {
                        return (out, false);
                    };
                    let mut buf = vec![0; READ_BACK.min(e.size) as usize];
                    match read_full(&mut s, &mut buf) {
                        Ok(n) => line.push_str(&format!(" {:?}", &buf[..n])),
                        Err(_) => return (out, false),
                    }
                }
                out.push(line);
            }
            Ok(None) => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let seek = walk(&mut SliceInput::new(data));
    let stream = walk(&mut StreamInput::unbounded(data));
    // Both end the same way; a seekable input finds a cut-off entry from its header, a stream
    // only when it runs out inside the data, so on failure the seek list may be shorter.
    assert_eq!(seek.1, stream.1);
    if seek.1 {
        assert_eq!(seek.0, stream.0);
    } else {
        assert!(stream.0.starts_with(&seek.0), "{seek:?} vs {stream:?}");
    }
    let opts = InspectOptions::default();
    let _ = analyze(&mut StreamInput::unbounded(data), &opts);
    if let Ok(s) = analyze(&mut SliceInput::new(data), &opts) {
        let _ = merge(vec![s.clone(), s]);
    }
});
