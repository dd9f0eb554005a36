//! Command line: argument definitions and dispatch. The library does the work; this maps its
//! results to output and exit codes (0 fine, 1 findings, 2 the run itself failed).

use std::io::{IsTerminal, Write};
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
    Scan(Box<ScanArgs>),
    /// List the GPUs cudalint knows and their compute capabilities.
    Gpus,
    /// List the rules (built-in and from --rules).
    Rules(RulesArgs),
    /// Print a rule's documentation.
    Explain(ExplainArgs),
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

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// The image (see above).
    pub image: String,
    /// Target GPUs by name, comma-separated (`H100,L4,"RTX 4090",A10G`; see `cudalint gpus`).
    #[arg(long, value_delimiter = ',')]
    pub gpu: Vec<String>,
    /// Target architectures, comma-separated (`sm_90,8.9,sm_100f`; 'f' means its whole family).
    #[arg(long, value_delimiter = ',')]
    pub arch: Vec<String>,
    /// The targets' driver version (`535.104.05`).
    #[arg(long, conflicts_with = "cuda_driver")]
    pub driver: Option<String>,
    /// The targets' driver, as the CUDA version it reports (`12.2`).
    #[arg(long)]
    pub cuda_driver: Option<String>,
    /// Targets from `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv` output
    /// or `kubectl get nodes -o json` (GPU feature discovery labels). Repeatable.
    #[arg(long)]
    pub targets_from: Vec<String>,
    /// Configuration file (default: ./cudalint.toml if present).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A directory of additional rules (*.toml). Repeatable.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// Ignore file (default: ./.cudalintignore.toml if present).
    #[arg(long)]
    pub ignore_file: Option<PathBuf>,
    /// Report only findings not recorded in this baseline.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Record the current findings as a baseline (for a later --baseline).
    #[arg(long)]
    pub write_baseline: Option<PathBuf>,
    /// Exit 1 when a finding at or above this severity remains (default: error).
    #[arg(long, value_enum)]
    pub fail_on: Option<crate::lint::rules::Severity>,
    /// Output format; repeat for several, each paired in order with an --output (text, json,
    /// sarif, junit, markdown; `inventory` is the scan's file listing as JSON, `listing` as text).
    #[arg(long, value_enum)]
    pub format: Vec<ScanFormat>,
    /// Where each --format goes, in order (the rest go to standard output).
    #[arg(long, short)]
    pub output: Vec<PathBuf>,
    /// Colours in text output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// Platform to scan from a multi-platform image (os/arch[/variant]); default: this host's.
    #[arg(long)]
    pub platform: Option<String>,
    /// Which layer digests to check.
    #[arg(long, value_enum, default_value_t = crate::image::Verify::Auto)]
    pub verify: crate::image::Verify,
    /// Layers decoded at once (default: the number of CPUs, at most 8).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Decode every cubin (see `inspect --cubins`).
    #[arg(long)]
    pub cubins: bool,
    /// Read every ELF file whole: also those whose headers show no CUDA, and machine code (static
    /// cudart versions).
    #[arg(long)]
    pub deep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScanFormat {
    Text,
    Json,
    Sarif,
    Junit,
    Markdown,
    Inventory,
    Listing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(clap::Args, Debug)]
pub struct RulesArgs {
    /// A directory of additional rules (*.toml). Repeatable.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// Rule code or name (`CL001`, `no-kernel-image`).
    pub rule: String,
    /// A directory of additional rules (*.toml). Repeatable.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
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
        Command::Scan(a) => scan(*a),
        Command::Gpus => gpus(),
        Command::Rules(a) => list_rules(a),
        Command::Explain(a) => explain(a),
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
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|()| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("cudalint: cannot write output: {e}");
        std::process::exit(2);
    }
}

fn scan(a: ScanArgs) -> ExitCode {
    match run_scan(a) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn load_config(path: Option<&PathBuf>) -> Result<Option<crate::lint::config::RawConfig>, String> {
    match path {
        Some(p) => crate::lint::config::read(p).map(Some),
        None if std::path::Path::new("cudalint.toml").exists() => {
            crate::lint::config::read(std::path::Path::new("cudalint.toml")).map(Some)
        }
        None => Ok(None),
    }
}

fn targets_of(a: &ScanArgs, cfg: &crate::lint::config::Config) -> Result<Vec<crate::lint::targets::Target>, String> {
    use crate::lint::targets;
    let cli_given = !a.gpu.is_empty() || !a.arch.is_empty() || !a.targets_from.is_empty();
    let (gpus, archs, from) = if cli_given {
        (a.gpu.clone(), a.arch.clone(), a.targets_from.clone())
    } else {
        (cfg.targets.gpus.clone(), cfg.targets.arch.clone(), cfg.targets.from.clone())
    };
    let mut out = Vec::new();
    for g in gpus.iter().map(|g| g.trim()).filter(|g| !g.is_empty()) {
        out.push(targets::gpu(g)?);
    }
    for x in archs.iter().map(|x| x.trim()).filter(|x| !x.is_empty()) {
        out.extend(targets::arch(x)?);
    }
    for f in &from {
        out.extend(targets::from_file(f)?);
    }
    let driver = a.driver.clone().or_else(|| if a.cuda_driver.is_none() { cfg.targets.driver.clone() } else { None });
    let cuda_driver =
        a.cuda_driver.clone().or_else(|| if a.driver.is_none() { cfg.targets.cuda_driver.clone() } else { None });
    let declared = match (&driver, &cuda_driver) {
        (Some(d), _) => Some(targets::driver(d).map(|(d, c)| (Some(d), c))?),
        (None, Some(c)) => Some((
            None,
            crate::cuda::CudaVersion::parse(c).ok_or_else(|| format!("{c:?} is not a CUDA version (12.2)"))?,
        )),
        (None, None) => None,
    };
    if let Some((d, c)) = declared {
        for t in out.iter_mut().filter(|t| t.driver.is_none() && t.driver_cuda.is_none()) {
            t.driver = d.clone();
            t.driver_cuda = Some(c);
        }
    }
    Ok(targets::dedup(out))
}

fn run_scan(a: ScanArgs) -> Result<ExitCode, String> {
    use crate::lint::{self, config, rules};
    // Configuration and rules first: a bad rule or config fails before any image is read.
    let raw = load_config(a.config.as_ref())?;
    let mut dirs = raw.as_ref().map(|r| r.rule_dirs()).unwrap_or_default();
    dirs.extend(a.rules.iter().cloned());
    let rules = rules::load(&dirs)?;
    let cfg = match raw {
        Some(r) => r.resolve(&rules)?,
        None => config::Config::default(),
    };
    let extra_ignores = match &a.ignore_file {
        Some(p) => config::read_ignore_file(p, &rules)?,
        None if std::path::Path::new(".cudalintignore.toml").exists() => {
            config::read_ignore_file(std::path::Path::new(".cudalintignore.toml"), &rules)?
        }
        None => Vec::new(),
    };
    let baseline = a.baseline.as_ref().map(|p| config::read_baseline(p)).transpose()?;
    let targets = targets_of(&a, &cfg)?;

    let mut opts = crate::image::ScanOptions::default();
    if let Some(p) = &a.platform {
        opts.platform = Some(crate::image::Platform::parse(p)?);
    }
    opts.verify = a.verify;
    if let Some(j) = a.jobs {
        opts.jobs = j.max(1);
    }
    opts.progress = !a.quiet;
    opts.inspect.every_cubin = a.cubins;
    opts.inspect.lean = !a.deep;
    let inventory = crate::image::scan(&a.image, &opts).map_err(|e| format!("{}: {e}", a.image))?;
    let fail_on = a.fail_on.or(cfg.fail_on).unwrap_or(rules::Severity::Error);
    let lint_opts = lint::LintOptions { rules: &rules, targets, fail_on, config: &cfg, extra_ignores, baseline };
    let report = lint::run(&inventory, lint_opts)?;
    if let Some(p) = &a.write_baseline {
        config::write_baseline(p, &report.findings)?;
    }

    let formats = if a.format.is_empty() { vec![ScanFormat::Text] } else { a.format.clone() };
    if a.output.len() > formats.len() {
        return Err("more --output than --format".into());
    }
    if formats.len() - a.output.len() > 1 {
        return Err("only one --format can go to standard output; give each other one an --output".into());
    }
    for (i, f) in formats.iter().enumerate() {
        let dest = a.output.get(i);
        let color = match a.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => dest.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let text = match f {
            ScanFormat::Text => report::lint::text(&report, report::lint::Paint(color)),
            ScanFormat::Json => report::lint::json(&report),
            ScanFormat::Sarif => report::lint::sarif(&report, &rules),
            ScanFormat::Junit => report::lint::junit(&report),
            ScanFormat::Markdown => report::lint::markdown(&report),
            ScanFormat::Inventory => report::scan::json(&inventory),
            ScanFormat::Listing => report::scan::text(&inventory),
        };
        match dest {
            Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?,
            None => write_stdout(&text),
        }
    }
    Ok(if report.failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn gpus() -> ExitCode {
    let mut out = String::from("GPU                                     compute capability\n");
    for g in crate::cuda::gpus::GPUS {
        let mut name = g.name.to_string();
        if !g.aliases.is_empty() {
            name.push_str(&format!(" ({})", g.aliases.join(", ")));
        }
        out.push_str(&format!("{name:<40} {}{}\n", g.cc, if g.unconfirmed { "  (secondary source)" } else { "" }));
    }
    write_stdout(&out);
    ExitCode::SUCCESS
}

fn list_rules(a: RulesArgs) -> ExitCode {
    let rules = match crate::lint::rules::load(&a.rules) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let mut out = String::new();
    for r in &rules {
        out.push_str(&format!(
            "{:<6} {:<28} {:<8} {:<14} {}\n",
            r.code,
            r.name,
            r.severity.as_str(),
            format!("{:?}", r.scope).to_lowercase(),
            r.summary
        ));
    }
    write_stdout(&out);
    ExitCode::SUCCESS
}

fn explain(a: ExplainArgs) -> ExitCode {
    let rules = match crate::lint::rules::load(&a.rules) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    match rules.iter().find(|r| r.code.eq_ignore_ascii_case(&a.rule) || r.name == a.rule) {
        Some(r) => {
            write_stdout(&crate::lint::rules::markdown(r));
            ExitCode::SUCCESS
        }
        None => fail(&format!("no rule {:?} (see `cudalint rules`)", a.rule)),
    }
}

/// The run itself failed: say why on stderr, exit 2 (never a partial "clean" result).
fn fail(msg: &str) -> ExitCode {
    eprintln!("cudalint: error: {msg}");
    ExitCode::from(2)
}
