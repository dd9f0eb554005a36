fn main() -> std::process::ExitCode {
    // glibc raises its mmap threshold to the largest block freed (up to 32 MiB) and keeps freed
    // heap per thread arena, so peak RSS grew with --jobs past the one memory budget (6 layers
    // of a 1 GB library under 128 MiB zstd windows: 211 / 255 / 264 MiB at --jobs 1 / 4 / 8,
    // scripts/bench-scan.py). A fixed threshold returns every large buffer when it is freed.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
    cudalint::cli::main()
}
