//! Command line: argument definitions and dispatch. The library does the work; this maps its
//! results to output and exit codes (0 fine, 1 findings, 2 the run itself failed).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use clap::{Parser, Subcommand, ValueEnum};

use crate::inspect::{InspectOptions, inspect_paths};
use crate::report;

pub mod args;
pub mod audit;
pub mod registry;
pub mod scan;
pub mod serve;
pub mod support;

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

const FAIL_ON_ROWS: &str = "Which findings make a GPU's row fail (default: error; never: none do). Not an exit status: \
support exits 0 unless the scan fails, diff exits 1 only on a lost GPU or a driver floor above --driver";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every piece of CUDA device code in files (directories are walked recursively):
    /// fatbin containers and their entries, hidden containers, cubins, PTX, archive members.
    Inspect(InspectArgs),
    /// Check an image's CUDA device code against the target GPUs and driver: reads the image in
    /// one streaming pass, reports findings with fixes, exits 1 when a finding reaches --fail-on
    /// and 2 when the scan could not finish. IMAGE: a docker-archive (`docker save` output), `-`
    /// for standard input, an OCI layout directory, an oci-archive, a root filesystem directory, a
    /// single file, a Python wheel, a lockfile (pylock.toml, uv.lock, hashed requirements, pip's
    /// report), a registry reference (`nvcr.io/nvidia/pytorch:25.01-py3`, `docker://...`) or an
    /// image in a local store (`docker-daemon:NAME`, `podman:NAME`, `containerd:NAME`; a bare
    /// `name:tag` tries them, then the registry); prefixes `docker-archive:`, `oci:`,
    /// `oci-archive:`, `dir:`, `file:` force the kind.
    Scan(Box<scan::ScanArgs>),
    /// On which GPUs and drivers does an image run? The support matrix over every GPU cudalint
    /// knows (`cudalint gpus`), grouped by architecture: native, PTX JIT, arch-gated (optional
    /// code for other chips), run-time compilers fall short, fails (naming the binaries), or n/a
    /// (another platform), with the minimum driver per GPU and one summary line; `--emit require`
    /// prints the NVIDIA_REQUIRE_CUDA constraint that enforces it. Exit 2 when the scan fails or
    /// finds nothing to judge.
    // support and diff are not gates on findings: their --fail-on says what fails a GPU's row.
    #[command(mut_arg("fail_on", |a| a.help(FAIL_ON_ROWS)))]
    Support(Box<support::SupportArgs>),
    /// What an upgrade changes in where an image runs: GPUs lost and gained, the driver floor,
    /// binaries that lost or gained architectures or PTX, run-time compilers and packages whose
    /// build changed. OLD and NEW take any form `scan` does; registry references share the layer
    /// cache. Exit 1 when NEW drops a GPU OLD ran on (or does not run on one of --gpu), or needs
    /// a driver above --driver.
    #[command(mut_arg("fail_on", |a| a.help(FAIL_ON_ROWS)))]
    Diff(Box<support::DiffArgs>),
    /// List the GPUs cudalint knows and their compute capabilities.
    Gpus(GpusArgs),
    /// List the rules (built-in and from --rules).
    Rules(RulesArgs),
    /// Print a rule's documentation.
    Explain(ExplainArgs),
    /// Scan the images of a registry (its catalog, filtered, optionally one shard of it): one
    /// report per image, a summary, exit 2 if any image could not be scanned.
    Registry(Box<registry::RegistryScanArgs>),
    /// Pre-deploy audit for Kubernetes: for each container of the workload manifests that requests
    /// nvidia.com/gpu, the GPU node pools (from `kubectl get nodes -o json`) its nodeName,
    /// nodeSelector, required node affinity and tolerations allow, and whether its image runs on
    /// each. Each image is scanned
    /// once. Exit 1 when a container fails on a pool, fits no GPU pool or has a finding at
    /// --fail-on; 2 when an image could not be scanned or a pool could not be judged.
    Audit(Box<audit::AuditArgs>),
    /// Merge the summary.json files of sharded `registry` runs.
    Merge(registry::MergeArgs),
    /// Scan on push: an HTTP endpoint for the registry's notifications (CNCF distribution's
    /// `notifications: endpoints:` webhook) that scans each pushed image for the targets, pushes
    /// its attestations with --attest, and serves /healthz and Prometheus /metrics. Runs until
    /// SIGTERM.
    Serve(Box<serve::ServeArgs>),
    /// The layer cache.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Print the version, and the digests of the built-in rules and knowledge it judges by
    /// (`--version` prints the version alone).
    Version(VersionArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell), e.g.
    /// `cudalint completions bash > /etc/bash_completion.d/cudalint`.
    Completions { shell: clap_complete::Shell },
    /// Print a man page (roff): `cudalint man > cudalint.1`, `cudalint man scan >
    /// cudalint-scan.1`, or write every page the main page refers to with `--dir
    /// ~/.local/share/man/man1`.
    Man {
        /// The subcommand whose page to print (`scan` gives cudalint-scan(1)); none: cudalint(1).
        command: Option<String>,
        /// Write cudalint.1 and a cudalint-COMMAND.1 per subcommand into this directory.
        #[arg(long, conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
    /// Internal: loads modules (--load) or launches a module's kernels in an isolated process
    /// (used by --on-device and --launch).
    #[command(hide = true)]
    DeviceChild {
        #[arg(long)]
        device: u32,
        #[arg(long)]
        load: bool,
        #[arg(long, default_value_t = 0)]
        skip: usize,
        kernels: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Remove every cached layer analysis and every cached wheel (a lockfile's, `wheels/`).
    Clean {
        #[arg(long, env = "CUDALINT_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
    },
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
pub struct RulesArgs {
    /// A directory of additional rules (*.toml). Repeatable.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// Output format (json: docs/schema.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(clap::Args, Debug)]
pub struct GpusArgs {
    /// Output format (json: docs/schema.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(clap::Args, Debug)]
pub struct VersionArgs {
    /// Output format (json: docs/schema.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let code = run(cli).unwrap_or_else(|e| report_error(&e));
    if std::env::var_os("CUDALINT_STATS").is_some() {
        print_stats();
    }
    code
}

/// The one place a failed run is told: the error and its causes on stderr, exit 2 (never a
/// partial "clean" result). Messages carry file names and registry answers, so no control
/// character reaches the terminal.
fn report_error(e: &anyhow::Error) -> ExitCode {
    eprintln!("{}", error_line(&chain_text(e)));
    ExitCode::from(2)
}

/// Every error cudalint prints starts so: clap's usage errors and the run's own alike, so that
/// one prefix finds them in a CI log (where stderr of several tools is mixed, the name says
/// whose it is, as `cudalint: note:` does).
const ERROR_PREFIX: &str = "cudalint: error: ";

/// An error message as printed: the prefix, then the message with its control characters
/// escaped (it carries file names and registry answers: no newline of theirs starts a line).
fn error_line(message: &str) -> String {
    format!("{ERROR_PREFIX}{}", crate::escape::text(message))
}

/// A command line clap refused (exit 2), said as every other error is: clap's own `error: `
/// becomes [`ERROR_PREFIX`]; the lines clap adds (what is missing, the usage, the hint) follow,
/// each escaped. `--help` and `--version` are not errors: clap prints them (exit 0).
fn usage_error(e: &clap::Error) -> ExitCode {
    // Bare `cudalint` prints the help (on stderr, exit 2): no error message to prefix.
    if !e.use_stderr() || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        e.exit();
    }
    // Plain text: the rest of cudalint's stderr is not coloured either.
    let text = e.render().to_string();
    let mut lines = text.trim_end().lines();
    let first = lines.next().unwrap_or_default();
    let mut out = error_line(first.strip_prefix("error: ").unwrap_or(first));
    for l in lines {
        out.push('\n');
        out.push_str(&crate::escape::text(l));
    }
    eprintln!("{out}");
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// The error and its causes joined by ": ", each said once: many library errors print their
/// source in their own text (`{path}: {source}`), and a context the cause already starts with
/// (the image spec before an error naming that file) is not repeated.
fn chain_text(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if parts.iter().any(|p| p.contains(&s)) {
            continue;
        }
        match parts.last_mut() {
            Some(last) if s.starts_with(last.as_str()) => *last = s,
            _ => parts.push(s),
        }
    }
    parts.join(": ")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    Ok(match cli.command {
        Command::Inspect(a) => inspect(a)?,
        Command::Scan(a) => scan::run(*a)?,
        Command::Support(a) => support::run(*a)?,
        Command::Diff(a) => support::diff(*a)?,
        Command::Gpus(a) => gpus(a.format)?,
        Command::Rules(a) => list_rules(a)?,
        Command::Explain(a) => explain(a)?,
        Command::Version(a) => version(a.format)?,
        Command::Registry(a) => registry::run(*a)?,
        Command::DeviceChild { device, load, skip, kernels } => {
            if load { crate::device::load_worker(device) } else { crate::device::child(device, skip, &kernels) }?;
            ExitCode::SUCCESS
        }
        Command::Audit(a) => audit::run(*a)?,
        Command::Merge(a) => registry::merge(a)?,
        Command::Serve(a) => serve::run(*a)?,
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "cudalint", &mut out);
            write_stdout(&String::from_utf8_lossy(&out))?;
            ExitCode::SUCCESS
        }
        Command::Man { command, dir } => man(command.as_deref(), dir.as_deref())?,
        Command::Cache(CacheCommand::Clean { cache_dir }) => {
            let dir =
                cache_dir.or_else(crate::cache::default_dir).context("no cache directory (set --cache-dir or HOME)")?;
            let n = crate::cache::LayerCache::new(dir.clone()).clean().with_context(|| dir.display().to_string())?;
            let w = crate::cache::WheelCache::clean(&dir).with_context(|| dir.join("wheels").display().to_string())?;
            write_stdout(&format!("removed {n} cached layer analyses and {w} wheels from {}\n", dir.display()))?;
            ExitCode::SUCCESS
        }
    })
}

/// The man pages: cudalint(1) lists its subcommands as cudalint-NAME(1), so each has its own.
fn man(command: Option<&str>, dir: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let mut root = <Cli as clap::CommandFactory>::command();
    root.build();
    let render = |cmd: clap::Command| -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out).context("rendering the man page")?;
        Ok(out)
    };
    // A subcommand's page is titled cudalint-NAME, as the main page refers to it.
    let page = |sub: &clap::Command| sub.clone().name(format!("cudalint-{}", sub.get_name()));
    let visible = || root.get_subcommands().filter(|s| !s.is_hide_set());
    if let Some(d) = dir {
        std::fs::create_dir_all(d).with_context(|| d.display().to_string())?;
        let mut written = vec![("cudalint.1".to_string(), render(root.clone())?)];
        for s in visible() {
            written.push((format!("cudalint-{}.1", s.get_name()), render(page(s))?));
        }
        for (name, bytes) in &written {
            let p = d.join(name);
            std::fs::write(&p, bytes).with_context(|| p.display().to_string())?;
        }
        write_stdout(&format!("wrote {} man pages to {}\n", written.len(), d.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = match command {
        None => render(root.clone())?,
        Some(name) => {
            let sub = visible().find(|s| s.get_name() == name).with_context(|| {
                let names: Vec<&str> = visible().map(|s| s.get_name()).collect();
                format!("no subcommand {name:?}; one of {}", names.join(", "))
            })?;
            render(page(sub))?
        }
    };
    write_stdout(&String::from_utf8_lossy(&bytes))?;
    Ok(ExitCode::SUCCESS)
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

fn inspect(a: InspectArgs) -> anyhow::Result<ExitCode> {
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
    write_stdout(&out)?;
    Ok(if !errors.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// When to paint text reports (`--color`): beside `OutputArgs`, whose field it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// Where the reports of `scan`, `audit`, `support` and `diff` go: each `--format FMT=PATH` to its
/// file, a bare `--format FMT` to standard output (or to the one `--output`).
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the report to this file instead of standard output. Only beside a single --format
    /// (several reports name their files in --format FMT=PATH).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Colours in text output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
}

/// The `--output` beside several formats: the trap of pairing flags by position.
const SEVERAL: &str = "--output names the file of a single report; with several --format, name each \
                       report's file in it: --format sarif=cudalint.sarif --format markdown=cudalint.md \
                       --format text (a bare --format goes to standard output)";

impl OutputArgs {
    /// The reports to write: `given`, else `default`; a lone bare format takes `--output`.
    /// At most one report goes to standard output and no two to one file.
    pub fn plan<T: Copy>(&self, given: &[args::Report<T>], default: T) -> anyhow::Result<Vec<args::Report<T>>> {
        let mut reports =
            if given.is_empty() { vec![args::Report { format: default, path: None }] } else { given.to_vec() };
        if let Some(o) = &self.output {
            match reports.as_mut_slice() {
                [only] if only.path.is_none() => only.path = Some(o.clone()),
                [_] => anyhow::bail!("--output {} and --format FMT=PATH both name the file: keep one", o.display()),
                _ => anyhow::bail!(SEVERAL),
            }
        }
        if reports.iter().filter(|r| r.path.is_none()).count() > 1 {
            anyhow::bail!(
                "only one report can go to standard output; name the others' files: --format FMT=PATH \
                 (--format sarif=cudalint.sarif)"
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in reports.iter().filter_map(|r| r.path.as_ref()) {
            if !seen.insert(p) {
                anyhow::bail!("two reports would be written to {}", p.display());
            }
        }
        Ok(reports)
    }

    /// Whether a report written to `to` gets ANSI colours.
    fn paint(&self, to: Option<&std::path::Path>) -> bool {
        use std::io::IsTerminal;
        match self.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => to.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    /// The terminal width a report written to `to` wraps to: standard output on a terminal
    /// (`COLUMNS` wins, as for other tools); files and pipes are not wrapped.
    fn width(&self, to: Option<&std::path::Path>) -> Option<usize> {
        if to.is_some() { None } else { stdout_width() }
    }

    /// A rendered report to its file, or to standard output.
    fn emit(&self, to: Option<&std::path::Path>, text: &str) -> anyhow::Result<()> {
        match to {
            Some(p) => std::fs::write(p, text).with_context(|| p.display().to_string()),
            None => write_stdout(text),
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn write_stdout(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write output"))
        }
        _ => Ok(()),
    }
}

/// The width standard output wraps to: a terminal's (`COLUMNS` wins, as for other tools);
/// pipes are not wrapped.
fn stdout_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok());
    columns.or_else(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
}

/// A table line whose last column, free text, wraps at spaces within `width` (at least 20
/// columns of room), its continuation lines indented under that column: the text report's
/// list wrapping, with words as the items. A word longer than the room is left whole.
fn fit_last(lead: &str, last: &str, width: Option<usize>) -> String {
    let words: Vec<String> = last.split_whitespace().map(String::from).collect();
    let room = width.map(|w| w.max(lead.chars().count() + 20));
    crate::report::text::wrap_list(lead, &words, " ", room).trim_end().to_string()
}

/// A document of `gpus`, `rules` or `version --format json`: the `schema` and `tool` every
/// JSON document starts with (docs/schema.md), then its own fields.
#[derive(serde::Serialize)]
struct Document<T: serde::Serialize> {
    schema: &'static str,
    tool: crate::schema::Tool,
    #[serde(flatten)]
    body: T,
}

fn json_document<T: serde::Serialize>(schema: &'static str, body: T) -> anyhow::Result<String> {
    let mut out = serde_json::to_string_pretty(&Document { schema, tool: crate::schema::Tool::current(), body })?;
    out.push('\n');
    Ok(out)
}

/// A row of `gpus --format json`: the text's columns.
#[derive(serde::Serialize)]
struct GpuRow {
    name: &'static str,
    cc: String,
    architecture: &'static str,
    hosts: crate::cuda::gpus::Host,
    aliases: &'static [&'static str],
    secondary_source: bool,
}

/// A row of `rules --format json`: the text's columns.
#[derive(serde::Serialize)]
struct RuleRow<'a> {
    code: &'a str,
    name: &'a str,
    severity: crate::lint::rules::Severity,
    scope: crate::lint::rules::Scope,
    summary: &'a str,
}

fn gpus(format: Format) -> anyhow::Result<ExitCode> {
    use crate::cuda::gpus::{GPUS, architecture};
    // By compute capability; the table's order (the best-known product first) within one.
    let mut gpus: Vec<&crate::cuda::gpus::Gpu> = GPUS.iter().collect();
    gpus.sort_by_key(|g| g.cc);
    if format == Format::Json {
        let gpus: Vec<GpuRow> = gpus
            .iter()
            .map(|g| GpuRow {
                name: g.name,
                cc: g.cc.to_string(),
                architecture: architecture(g.cc),
                hosts: g.host,
                aliases: g.aliases,
                secondary_source: g.unconfirmed,
            })
            .collect();
        #[derive(serde::Serialize)]
        struct Gpus {
            gpus: Vec<GpuRow>,
        }
        write_stdout(&json_document(crate::schema::GPUS, Gpus { gpus })?)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Columns as wide as their longest cell; the aliases, of any length, go last.
    let w = gpus.iter().map(|g| g.name.chars().count()).max().unwrap_or(0).max("GPU".len());
    let wa = gpus.iter().map(|g| architecture(g.cc).len()).max().unwrap_or(0).max("architecture".len());
    let width = stdout_width();
    let mut out = format!("{:<w$}  {:<4}  {:<wa$}  {:<6}  also\n", "GPU", "cc", "architecture", "hosts");
    for g in gpus {
        let mut also = g.aliases.join(", ");
        if g.unconfirmed {
            also = if also.is_empty() { "(secondary source)".into() } else { format!("{also} (secondary source)") };
        }
        let lead =
            format!("{:<w$}  {:<4}  {:<wa$}  {:<6}  ", g.name, g.cc.to_string(), architecture(g.cc), g.host.as_str());
        out.push_str(&fit_last(&lead, &also, width));
        out.push('\n');
    }
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn list_rules(a: RulesArgs) -> anyhow::Result<ExitCode> {
    let mut rules = crate::lint::rules::load(&a.rules)?;
    // By code, the user's rules among the built-in ones (codes are unique).
    rules.sort_by(|a, b| a.code.cmp(&b.code));
    let scope = |r: &crate::lint::rules::Rule| {
        serde_json::to_value(r.scope).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
    };
    if a.format == Format::Json {
        let rules: Vec<RuleRow> = rules
            .iter()
            .map(|r| RuleRow {
                code: &r.code,
                name: &r.name,
                severity: r.severity,
                scope: r.scope,
                summary: &r.summary,
            })
            .collect();
        #[derive(serde::Serialize)]
        struct Rules<'a> {
            rules: Vec<RuleRow<'a>>,
        }
        write_stdout(&json_document(crate::schema::RULES, Rules { rules })?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let wc = rules.iter().map(|r| r.code.len()).max().unwrap_or(0);
    let wn = rules.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let ws = rules.iter().map(|r| scope(r).len()).max().unwrap_or(0);
    let width = stdout_width();
    let mut out = String::new();
    for r in &rules {
        let lead = format!("{:<wc$}  {:<wn$}  {:<7}  {:<ws$}  ", r.code, r.name, r.severity.as_str(), scope(r));
        out.push_str(&fit_last(&lead, &r.summary, width));
        out.push('\n');
    }
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `cudalint version`: what a bug report needs beside the version: which built-in rules and
/// knowledge this binary judges by (two builds of one version can differ in them).
fn version(format: Format) -> anyhow::Result<ExitCode> {
    let mut rules = crate::digest::Hasher::sha256();
    for (name, text) in crate::lint::rules::BUILTIN_RULES {
        rules.update(name.as_bytes());
        rules.update(text.as_bytes());
    }
    let rules = rules.finish();
    let count = crate::lint::rules::BUILTIN_RULES.len();
    let knowledge = &crate::knowledge::get().digest;
    let out = match format {
        // Fields in the order the text says them.
        Format::Json => {
            #[derive(serde::Serialize)]
            struct Version<'a> {
                version: &'static str,
                rules: Digests<'a>,
                knowledge: Digests<'a>,
            }
            #[derive(serde::Serialize)]
            struct Digests<'a> {
                #[serde(skip_serializing_if = "Option::is_none")]
                builtin: Option<usize>,
                digest: &'a str,
            }
            let v = Version {
                version: env!("CARGO_PKG_VERSION"),
                rules: Digests { builtin: Some(count), digest: &rules },
                knowledge: Digests { builtin: None, digest: knowledge },
            };
            json_document(crate::schema::VERSION, v)?
        }
        Format::Text => format!(
            "cudalint {}\nrules: {count} built in, {rules}\nknowledge: {knowledge}\n",
            env!("CARGO_PKG_VERSION")
        ),
    };
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn explain(a: ExplainArgs) -> anyhow::Result<ExitCode> {
    let rules = crate::lint::rules::load(&a.rules)?;
    let r = rules
        .iter()
        .find(|r| r.code.eq_ignore_ascii_case(&a.rule) || r.name == a.rule)
        .with_context(|| format!("no rule {:?} (see `cudalint rules`)", a.rule))?;
    write_stdout(&crate::lint::rules::markdown(r))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    /// Each prefix reads as its kind, and `scan --help` and docs/inputs.md name every one: a
    /// prefix added to the table and not to them fails here.
    #[test]
    fn parse_help_and_docs_go_by_the_prefix_table() {
        let mut cli = <super::Cli as clap::CommandFactory>::command();
        let help = cli.find_subcommand_mut("scan").unwrap().render_long_help().to_string();
        let inputs = include_str!("../../docs/inputs.md");
        for (prefix, _) in crate::image::PREFIXES {
            let kind = match crate::image::Source::parse(&format!("{prefix}/nonexistent/x")).unwrap() {
                crate::image::Source::DockerArchive(..) => "docker-archive:",
                crate::image::Source::OciArchive(..) => "oci-archive:",
                crate::image::Source::OciLayout(..) => "oci:",
                crate::image::Source::Dir(_) => "dir:",
                crate::image::Source::File(_) => "file:",
                crate::image::Source::Registry(_) => "docker://",
                crate::image::Source::Daemon(crate::image::daemon::Engine::Docker, _) => "docker-daemon:",
                crate::image::Source::Daemon(crate::image::daemon::Engine::Podman, _) => "podman:",
                crate::image::Source::Containerd(_) => "containerd:",
                other => panic!("{prefix} read as {other:?}"),
            };
            assert_eq!(kind, *prefix);
            assert!(help.contains(&format!("`{prefix}")), "`scan --help` does not name {prefix}");
            assert!(inputs.contains(&format!("`{prefix}`")), "docs/inputs.md does not name {prefix}");
        }
    }

    #[test]
    fn the_last_column_wraps_under_itself() {
        let lead = format!("{:<10}", "CL001");
        let text = "no kernel image for the target GPU in a binary that is loaded";
        let out = super::fit_last(&lead, text, Some(40));
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert!(out.lines().skip(1).all(|l| l.starts_with(&" ".repeat(10)) && !l[10..].starts_with(' ')), "{out}");
        assert_eq!(out.split_whitespace().collect::<Vec<_>>()[1..].join(" "), text);
        // Not on a terminal: one line, as before.
        assert_eq!(super::fit_last(&lead, text, None), format!("{lead}{text}"));
    }

    use super::chain_text;

    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("{path}: {source}")]
        struct Io {
            path: String,
            source: std::io::Error,
        }
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(Io { path: "/x.tar".into(), source: io }).context("/x.tar");
        assert_eq!(chain_text(&e), "/x.tar: entity not found");
        let e = anyhow::anyhow!("connection refused").context("registry r").context("r/img:1");
        assert_eq!(chain_text(&e), "r/img:1: registry r: connection refused");
    }
}
