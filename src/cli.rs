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
    match cli.command {
        Command::Inspect(a) => inspect(a),
    }
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
