//! Report sinks. `inspect` has a human listing and a JSON document (schema in docs/schema.md).

pub mod cyclonedx;
pub mod escape;
pub mod html;
pub mod inspect;
pub mod lint;
pub mod scan;

/// `1.1 MiB`, `904 B`: sizes for people.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}
