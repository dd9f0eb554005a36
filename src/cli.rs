//! Command line: argument definitions and dispatch. The library does the work; this maps its
//! results to output and exit codes (0 fine, 1 findings, 2 the run itself failed).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::inspect::{InspectOptions, inspect_paths};
use crate::report;

#[derive(Parser, Debug)]
#[command(
    name = "cudalint",
    version,
    about = "Find CUDA device code in files and images, and check it will run on your GPUs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every piece of CUDA device code in files (directories are walked recursively):
    /// fatbin containers and their entries, hidden containers, cubins, PTX, archive members.
    Inspect(InspectArgs),
    /// Read a whole image in one streaming pass and list the CUDA device code of its final
    /// filesystem. IMAGE: a docker-archive (`docker save` output), `-` for standard input, an OCI
    /// layout directory, an oci-archive, a root filesystem directory, a single file, or a Python
    /// wheel; prefixes `docker-archive:`, `oci:`, `oci-archive:`, `dir:`, `file:` force the kind.
    Scan(ScanArgs),
}

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// The image (see above).
    pub image: String,
    /// Platform to scan from a multi-platform image (os/arch[/variant]); default: this host's.
    #[arg(long)]
    pub platform: Option<String>,
    /// Which layer digests to check.
    #[arg(long, value_enum, default_value_t = crate::image::Verify::Auto)]
    pub verify: crate::image::Verify,
    /// Layers decoded at once (default: the number of CPUs, at most 8).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Decode every cubin (see `inspect --cubins`).
    #[arg(long)]
    pub cubins: bool,
    /// Look inside every ELF file, not only those whose headers show CUDA.
    #[arg(long)]
    pub deep: bool,
}

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// Files or directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Decode every cubin and PTX image (by default each module's images are read only until one
    /// shows it carries kernels).
    #[arg(long)]
    pub cubins: bool,
    /// List the kernel names of every cubin (implies --cubins; long output for big libraries).
    #[arg(long)]
    pub kernels: bool,
    /// Also list files that carry no device code.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Inspect(a) => inspect(a),
        Command::Scan(a) => scan(a),
    };
    if std::env::var_os("CUDALINT_STATS").is_some() {
        print_stats();
    }
    code
}

/// `CUDALINT_STATS=1`: bytes this process read and its peak RSS, on stderr (benchmarks).
fn print_stats() {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |text: &str, key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string()).unwrap_or_default()
    };
    eprintln!("cudalint-stats: rchar={} peak_rss={}", field(&io, "rchar:"), field(&status, "VmHWM:"));
}

fn inspect(a: InspectArgs) -> ExitCode {
    let opts = InspectOptions { every_cubin: a.cubins, kernel_names: a.kernels, ..Default::default() };
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for r in inspect_paths(&a.paths, &opts) {
        match r {
            Ok(f) if a.all || f.cuda_relevant() => files.push(f),
            Ok(_) => {}
            Err((path, e)) => errors.push(report::inspect::FileError { path, message: e.to_string() }),
        }
    }
    let out = match a.format {
        Format::Text => report::inspect::text(&files, &errors),
        Format::Json => report::inspect::json(&files, &errors),
    };
    write_stdout(&out);
    if !errors.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn write_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("cudalint: cannot write output: {e}");
            std::process::exit(2);
        }
    }
}

fn scan(a: ScanArgs) -> ExitCode {
    let mut opts = crate::image::ScanOptions::default();
    if let Some(p) = &a.platform {
        match crate::image::Platform::parse(p) {
            Ok(p) => opts.platform = Some(p),
            Err(e) => return fail(&e),
        }
    }
    opts.verify = a.verify;
    if let Some(j) = a.jobs {
        opts.jobs = j.max(1);
    }
    opts.progress = !a.quiet;
    opts.inspect.every_cubin = a.cubins;
    opts.inspect.lean = !a.deep;
    let report = match crate::image::scan(&a.image, &opts) {
        Ok(r) => r,
        Err(e) => return fail(&format!("{}: {e}", a.image)),
    };
    let out = match a.format {
        Format::Text => report::scan::text(&report),
        Format::Json => report::scan::json(&report),
    };
    match &a.output {
        Some(p) => {
            if let Err(e) = std::fs::write(p, out) {
                return fail(&format!("{}: {e}", p.display()));
            }
        }
        None => write_stdout(&out),
    }
    ExitCode::SUCCESS
}

/// The run itself failed: say why on stderr, exit 2 (never a partial "clean" result).
fn fail(msg: &str) -> ExitCode {
    eprintln!("cudalint: error: {msg}");
    ExitCode::from(2)
}
