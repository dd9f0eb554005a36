//! `cudalint scan`: read an image, judge it, write the reports.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};
use crate::report::{self, Format, RenderConfig, Subject, count};

#[derive(clap::Args, Debug)]
// CUDALINT_FORMAT and CUDALINT_OUTPUT are scan's alone: `support`, `diff` and `audit` take other
// formats, and a job that sets them for its gate must not have those commands refuse the value or
// write over the gate's report.
#[command(mut_arg("output", |a| a.env("CUDALINT_OUTPUT")))]
pub struct ScanArgs {
    /// The image: a docker-archive (`docker save` output), `-` for standard input, an OCI layout
    /// directory, an oci-archive, a root filesystem directory, a single file, a Python wheel, a
    /// lockfile (pylock.toml, uv.lock, requirements*.txt with --hash, pip's --report JSON: judged
    /// as the image its wheels make for --platform and --python), or a registry reference
    /// (`registry/repo:tag`, `repo@sha256:...`, `docker://...`), or an image in a local store
    /// (`docker-daemon:NAME`, `podman:NAME`, `containerd:NAME`). A bare `name:tag` is looked up
    /// in the local Docker, Podman and containerd stores, then the registry (--image-src); a
    /// path-like argument naming no file is "no such file". Prefixes `docker-archive:`, `oci:`,
    /// `oci-archive:`, `dir:`, `file:`, `docker://` force the kind. Archives may be gzip- or
    /// zstd-compressed; pick one image of several with `docker-archive:PATH:TAG` or
    /// `docker-archive:PATH:@N`.
    pub image: String,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Record the current findings as a baseline (for a later --baseline). The run then exits 0
    /// (2 on errors): recording known findings is not a gate, as ruff's --add-noqa is not.
    #[arg(long)]
    pub write_baseline: Option<PathBuf>,
    /// Text reports also list the detail: per-binary findings folded into an image-level one, and
    /// what could not be read in data libraries load themselves.
    #[arg(long, short)]
    pub verbose: bool,
    /// A report: `FMT` to standard output, `FMT=PATH` to a file; repeat for several
    /// (`--format sarif=cudalint.sarif --format markdown=summary.md --format text`). `inventory`
    /// is the scan's file listing as JSON, `listing` as text; a run that asks only for
    /// `cyclonedx`, `inventory` or `listing` needs no targets and never fails the gate.
    #[arg(long, value_name = "FMT[=PATH]", value_parser = super::args::report_parser::<Format>(), env = "CUDALINT_FORMAT")]
    pub format: Vec<super::args::Report<Format>>,
    /// A CycloneDX JSON SBOM of this image (from Syft, Trivy, ...): `--format cyclonedx` writes it
    /// with cudalint's properties added to the binaries it lists and the binaries it misses added
    /// (the default format when no --format is given).
    #[arg(long, value_name = "FILE.cdx.json")]
    pub enrich: Option<PathBuf>,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// Proving the verdicts on the GPUs of this machine.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DeviceArgs {
    /// Load every module on this machine's GPU(s) and compare the driver's answer with the static
    /// verdict (needs an NVIDIA driver; exit 2 without one).
    #[arg(long)]
    pub on_device: bool,
    /// GPU ordinal to use (repeatable; default all).
    #[arg(long = "device", requires = "on_device")]
    pub devices: Vec<u32>,
    /// Also launch every kernel once (1x1x1 grid, zero-filled parameters), each module in an
    /// isolated child process.
    #[arg(long, requires = "on_device")]
    pub launch: bool,
    /// Seconds one kernel launch may take before its child process is killed.
    #[arg(long, default_value_t = 30, requires = "launch")]
    pub launch_timeout: u64,
    /// Seconds one module load (PTX JIT included) may take before the load worker is killed.
    #[arg(long, default_value_t = 600, requires = "on_device")]
    pub load_timeout: u64,
}

pub fn run(a: ScanArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(a.targets.spec())?;
    let default = if a.enrich.is_some() { Format::Cyclonedx } else { Format::Text };
    let reports = a.out.plan(&a.format, default)?;
    if a.enrich.is_some() && !reports.iter().any(|r| r.format == Format::Cyclonedx) {
        anyhow::bail!("--enrich writes the enriched SBOM as --format cyclonedx; add that format");
    }
    // Listings (SBOM, inventory) describe the image; only a verdict needs targets and gates.
    let listing_only = reports.iter().all(|r| r.format.is_inventory());
    if policy.targets.is_empty() && !a.device.on_device && !listing_only {
        anyhow::bail!(super::args::no_targets(&policy));
    }
    if a.verbose {
        eprintln!("cudalint: {}", policy.files.line().unwrap_or_else(|| "no config, ignore file or baseline".into()));
    }
    // Read before the scan: a missing SBOM fails first.
    let sbom = a.enrich.as_deref().map(read_sbom).transpose()?;
    let mut opts = scan_options(&a.read, &a.registry, policy.config.memory)?;
    super::support::registry_only(&a.image, &a.registry)?;
    let driver = if a.device.on_device {
        if std::env::var_os("CUDA_CACHE_DISABLE").is_none() {
            // SAFETY: no other thread exists yet. JIT timings must be real compilations, not
            // compute-cache hits, unless the user chose otherwise.
            unsafe { std::env::set_var("CUDA_CACHE_DISABLE", "1") };
        }
        let d = crate::device::driver::Driver::load()?;
        opts.inspect.keep_modules = true;
        Some(d)
    } else {
        None
    };
    let inventory = crate::image::scan(&a.image, &opts).with_context(|| a.image.clone())?;
    let read = &inventory.stats;
    if a.verbose {
        eprintln!(
            "cudalint: read {} in {}, {} of them ELF or device code",
            count(read.files as usize, "file"),
            count(read.layers as usize, "layer"),
            read.inspected
        );
    }
    // Code that compiles at run time is something to judge too (a pure-Python package that
    // builds every kernel at first use).
    if read.inspected == 0 && inventory.python_compiles.is_empty() && !listing_only {
        // A gate that judged nothing never passes: the wrong directory, an empty image.
        anyhow::bail!(
            "{}: read {}, none of them ELF, cubin, fatbin, PTX or a wheel: nothing was judged (is this the image you meant?)",
            a.image,
            count(read.files as usize, "file")
        );
    }
    let device = match &driver {
        Some(d) => {
            let (plans, skipped) = crate::device::plan_all(&inventory);
            let env = crate::cuda::compat::JitEnv::from_env(&inventory.image.env);
            let o = crate::device::DeviceOptions {
                devices: a.device.devices.clone(),
                launch: a.device.launch,
                timeout: std::time::Duration::from_secs(a.device.launch_timeout),
                load_timeout: std::time::Duration::from_secs(a.device.load_timeout),
                jit_env: env,
            };
            let mut r = crate::device::run(d, &std::sync::Arc::new(plans), &o)?;
            r.skipped = skipped;
            Some(r)
        }
        None => None,
    };
    // A pre-deploy audit on the node itself: with no targets named, the node's own GPUs and
    // driver are the targets.
    let targets = match device.as_ref().filter(|_| policy.targets.is_empty()) {
        Some(d) => d.devices.iter().filter_map(crate::lint::targets::Target::from_device).collect(),
        None => policy.targets.clone(),
    };
    let report = policy.judge(&inventory, &targets, device)?;
    if a.registry.attest {
        // Beside the inventory attestation the scan pushed: the support matrix, by this policy.
        match crate::lint::support::support(&policy, &a.image, &inventory) {
            Ok((support, _)) => super::support::attach(&a.image, &opts, &inventory, &support)?,
            Err(e @ crate::lint::support::SupportError::NothingToJudge) => {
                eprintln!("cudalint: note: {}: no support attestation pushed: {e}", crate::escape::text(&a.image))
            }
            Err(e) => return Err(anyhow::Error::from(e).context(a.image.clone())),
        }
    }
    if let Some(p) = &a.write_baseline {
        crate::lint::config::write_baseline(p, &report.findings)?;
        eprintln!(
            "cudalint: recorded {} in {}; exit 0 (run with --baseline {} to fail only on new ones)",
            count(report.findings.len(), "finding"),
            p.display(),
            p.display()
        );
    }
    for r in &reports {
        let to = r.path.as_deref();
        let cfg = RenderConfig {
            color: a.out.paint(to),
            rules: &policy.rules,
            sbom: sbom.as_ref(),
            verbose: a.verbose,
            width: a.out.width(to),
        };
        let subject = Subject { report: &report, inventory: &inventory };
        let out = report::render(r.format, &subject, &cfg)?;
        if let Some(note) = &out.note {
            eprintln!("cudalint: {note}");
        }
        a.out.emit(to, &out.text)?;
    }
    let gated = !listing_only && a.write_baseline.is_none();
    Ok(if report.failed && gated { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// SBOMs of big images run to tens of MiB. The text is held through the scan and copied, with
/// the additions, into the enriched SBOM: bounded so that both stay well within memory.
const MAX_SBOM: u64 = 64 << 20;

fn read_sbom(p: &std::path::Path) -> anyhow::Result<report::enrich::Sbom> {
    use std::io::Read;
    let shown = || format!("--enrich {}", p.display());
    let f = std::fs::File::open(p).with_context(shown)?;
    let meta = f.metadata().with_context(shown)?;
    if meta.len() > MAX_SBOM {
        anyhow::bail!("{}: {} bytes; an SBOM larger than {} MiB is refused", shown(), meta.len(), MAX_SBOM >> 20);
    }
    // Read no more than the bound, whatever the file grows to meanwhile (or a pipe carries).
    let mut buf = Vec::new();
    f.take(MAX_SBOM + 1).read_to_end(&mut buf).with_context(shown)?;
    if buf.len() as u64 > MAX_SBOM {
        anyhow::bail!("{}: an SBOM larger than {} MiB is refused", shown(), MAX_SBOM >> 20);
    }
    let text = String::from_utf8(buf).map_err(|e| anyhow::anyhow!("{}: not UTF-8 text: {e}", shown()))?;
    report::enrich::Sbom::new(text, shown()).with_context(shown)
}
