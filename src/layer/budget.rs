//! One memory budget for a scan (`--memory`): every large allocation that grows with the input's
//! choices (a zstd window, an xz dictionary) or with `--jobs` (each layer's pipes, read buffers and
//! inspector) is reserved from it before it is made. A layer's decoder starts when its reservation
//! fits, so small-window layers run in parallel beside a large one; one that can never fit is
//! refused, never allowed to allocate. `serve`'s workers share one budget.

use std::sync::{Condvar, Mutex};

/// The default budget: the bound docs/inputs.md promises.
pub const DEFAULT: u64 = 256 << 20;

/// What a layer costs besides its decoder: two pipe stages of 4 x 1 MiB chunks, the read and
/// inspector windows, and what the inspector keeps in memory of one file (captures spill past
/// 16 MiB).
pub const LAYER_OVERHEAD: u64 = 24 << 20;

#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    state: Mutex<Held>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct Held {
    used: u64,
    /// Held for the whole scan (a compressed archive's own decoder): what others can never have.
    pinned: u64,
}

/// Bytes held from a [`MemoryBudget`] until dropped.
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a MemoryBudget,
    bytes: u64,
    pinned: bool,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::new(DEFAULT)
    }
}

impl MemoryBudget {
    pub fn new(total: u64) -> MemoryBudget {
        MemoryBudget { total, state: Mutex::new(Held::default()), freed: Condvar::new() }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Waits until `bytes` fit beside what others hold, then holds them. `Err` (what the
    /// budget can ever give: its total less what is pinned) when they could never fit.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation<'_>, u64> {
        self.take(bytes, false)
    }

    /// Like [`MemoryBudget::reserve`], for what is held until the scan ends: later requests that
    /// could only fit once it is released are refused instead of waiting for ever.
    pub fn reserve_for_the_scan(&self, bytes: u64) -> Result<Reservation<'_>, u64> {
        self.take(bytes, true)
    }

    fn take(&self, bytes: u64, pinned: bool) -> Result<Reservation<'_>, u64> {
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.total - held.pinned;
        if bytes > room {
            return Err(room);
        }
        while held.used + bytes > self.total {
            held = self.freed.wait(held).unwrap_or_else(|e| e.into_inner());
            if bytes > self.total - held.pinned {
                return Err(self.total - held.pinned);
            }
        }
        held.used += bytes;
        if pinned {
            held.pinned += bytes;
        }
        Ok(Reservation { budget: self, bytes, pinned })
    }

    /// Bytes held now (for tests and `-v`).
    pub fn in_use(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).used
    }
}

impl Reservation<'_> {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds at least `bytes`, for a decoder whose later frame asks more than its first: what is
    /// held already is kept; more is waited for as by [`Reservation::resize`], except by what is
    /// held for the whole scan (an archive's decoder, whose layers wait on its bytes), which takes
    /// only what is free now.
    pub fn grow(&mut self, bytes: u64) -> Result<(), u64> {
        if bytes <= self.bytes {
            return Ok(());
        }
        if self.pinned {
            let b = self.budget;
            let mut held = b.state.lock().unwrap_or_else(|e| e.into_inner());
            if held.used - self.bytes + bytes > b.total {
                return Err(b.total - (held.used - self.bytes));
            }
            held.used = held.used - self.bytes + bytes;
            held.pinned = held.pinned - self.bytes + bytes;
            self.bytes = bytes;
            return Ok(());
        }
        self.resize(bytes)
    }

    /// Holds `bytes` instead: less at once; more when it fits beside the others, else after
    /// letting go of what it held (it never waits while holding, so two growers cannot wait on
    /// each other). `Err` as for [`MemoryBudget::reserve`].
    pub fn resize(&mut self, bytes: u64) -> Result<(), u64> {
        let b = self.budget;
        let mut held = b.state.lock().unwrap_or_else(|e| e.into_inner());
        let room = b.total - held.pinned + if self.pinned { self.bytes } else { 0 };
        if bytes > room {
            return Err(room);
        }
        if bytes <= self.bytes || held.used - self.bytes + bytes <= b.total {
            held.used = held.used - self.bytes + bytes;
            if self.pinned {
                held.pinned = held.pinned - self.bytes + bytes;
            }
            self.bytes = bytes;
            b.freed.notify_all();
            return Ok(());
        }
        held.used -= self.bytes;
        if self.pinned {
            held.pinned -= self.bytes;
        }
        self.bytes = 0;
        b.freed.notify_all();
        while held.used + bytes > b.total {
            held = b.freed.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.used += bytes;
        if self.pinned {
            held.pinned += bytes;
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.state.lock().unwrap_or_else(|e| e.into_inner());
        held.used -= self.bytes;
        if self.pinned {
            held.pinned -= self.bytes;
        }
        self.budget.freed.notify_all();
    }
}

/// A size in MiB as the budget's messages say it: `128 MiB`, `24.5 MiB`.
pub fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / 1048576.0)
    }
}

/// A budget as `--memory` or the config's `memory` gives it: a size, at least what one layer
/// needs beside an 8 MiB window.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    let least = LAYER_OVERHEAD + (8 << 20);
    if n < least {
        return Err(format!("{s}: at least {} (one layer's buffers and an 8 MiB window)", mib(least)));
    }
    Ok(n)
}

/// `256M`, `1G`, `512MiB`, `268435456`: a size in bytes (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: a size such as 256M or 1G"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?}: a size such as 256M or 1G")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn reservations_wait_for_room_and_never_overlap_past_the_total() {
        let b = Arc::new(MemoryBudget::new(100));
        assert_eq!(b.reserve(101).unwrap_err(), 100);
        let peak = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for i in 0..8 {
                let (b, peak) = (b.clone(), peak.clone());
                s.spawn(move || {
                    let r = b.reserve(if i % 2 == 0 { 60 } else { 30 }).unwrap();
                    peak.fetch_max(b.in_use(), Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    drop(r);
                });
            }
        });
        assert!(peak.load(Ordering::SeqCst) <= 100);
        assert_eq!(b.in_use(), 0);
        // What is held for the scan is never given back before it ends: a request that could
        // only fit then is refused at once, not left waiting.
        let outer = b.reserve_for_the_scan(70).unwrap();
        assert_eq!(b.reserve(31).unwrap_err(), 30);
        assert_eq!(b.reserve(30).unwrap().bytes(), 30);
        drop(outer);
        assert_eq!(b.reserve(100).unwrap().bytes(), 100);
        // Resized: down at once, up when it fits, never past the total.
        let mut r = b.reserve(80).unwrap();
        r.resize(20).unwrap();
        assert_eq!(b.in_use(), 20);
        let other = b.reserve(70).unwrap();
        assert_eq!(r.resize(101).unwrap_err(), 100);
        r.resize(30).unwrap();
        assert_eq!(b.in_use(), 100);
        drop(other);
        r.resize(100).unwrap();
        assert_eq!(b.in_use(), 100);
        drop(r);
        assert_eq!(b.in_use(), 0);
    }

    /// Package records keep at most an eighth of the default budget (packages sit below `layer`
    /// and cannot name it).
    #[test]
    fn package_records_keep_an_eighth_of_the_default_budget() {
        assert_eq!(crate::packages::MAX_KEPT as u64, DEFAULT / 8);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999G").is_err());
    }
}
