//! Bounded decompression of fatbin payloads (docs/cuda-binaries.md §3): the output never grows past the size the
//! entry header declares, so a hostile payload cannot make us allocate more than we chose to.

use std::cell::RefCell;

use super::fatbin::Compression;

/// Largest uncompressed payload we agree to materialise (stub detection, notes).
pub const MAX_UNCOMPRESSED: u64 = 64 << 20;

thread_local! {
    // One decoder context per thread, reused: creating one costs more than decoding a stub.
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

pub fn decompress(kind: Compression, data: &[u8], uncompressed_size: u64) -> Result<Vec<u8>, String> {
    if uncompressed_size > MAX_UNCOMPRESSED {
        return Err(format!(
            "declared uncompressed size {uncompressed_size:#x} exceeds the {MAX_UNCOMPRESSED:#x}-byte limit"
        ));
    }
    let want = uncompressed_size as usize;
    match kind {
        Compression::None => Ok(data.to_vec()),
        Compression::Lz4 => {
            let mut out = vec![0u8; want];
            let n = lz4_flex::block::decompress_into(data, &mut out)
                .map_err(|e| format!("LZ4 block does not decode into the declared {want} bytes: {e}"))?;
            if n != want {
                return Err(format!("LZ4 block decodes to {n} bytes, header says {want}"));
            }
            Ok(out)
        }
        Compression::Zstd => ZSTD.with(|z| {
            let mut z = z.borrow_mut();
            if z.is_none() {
                *z = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("ZSTD: {e}"))?);
            }
            let dec = z.as_mut().expect("just set");
            // The output buffer is exactly the declared size: a frame that decodes to more
            // (a bomb) fails instead of growing it.
            let mut out = Vec::with_capacity(want);
            match dec.decompress_to_buffer(data, &mut out) {
                Ok(n) if n == want => Ok(out),
                Ok(n) => Err(format!("ZSTD frame decodes to {n} bytes, header says {want}")),
                Err(e) if e.to_string().contains("Destination buffer is too small") => {
                    Err(format!("ZSTD frame decodes to more than the {want} bytes the header declares"))
                }
                Err(e) => Err(format!("ZSTD frame does not decode: {e}")),
            }
        }),
        Compression::Other => Err("unknown compression".to_string()),
    }
}
