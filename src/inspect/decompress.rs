//! Bounded decompression of fatbin payloads (doc §3): the output never grows past the size the
//! entry header declares, so a hostile payload cannot make us allocate more than we chose to.

use std::io::Read;

use super::fatbin::Compression;

/// Largest uncompressed payload we agree to materialise (stub detection, notes).
pub const MAX_UNCOMPRESSED: u64 = 64 << 20;

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
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::new(data).map_err(|e| format!("ZSTD: {e}"))?;
            let mut out = Vec::with_capacity(want);
            // One byte more than declared tells "exactly as declared" from "larger" (a bomb).
            dec.take(want as u64 + 1).read_to_end(&mut out).map_err(|e| format!("ZSTD frame does not decode: {e}"))?;
            if out.len() > want {
                return Err(format!("ZSTD frame decodes to more than the {want} bytes the header declares"));
            }
            if out.len() < want {
                return Err(format!("ZSTD frame decodes to {} bytes, header says {want}", out.len()));
            }
            Ok(out)
        }
        Compression::Other => Err("unknown compression".to_string()),
    }
}
