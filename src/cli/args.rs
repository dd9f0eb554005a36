//! Options shared by `scan`, `registry` and `audit`: targets, policy (config, rules, ignores,
//! fail-on), how images are read, how registries are reached. Clap only: each translates into
//! the library's plain values ([`PolicySpec`], [`ScanOptions`]).

use std::path::PathBuf;

use anyhow::Context;

use crate::image::ScanOptions;
use crate::lint::policy::{Policy, PolicySpec, TargetSpec};
use crate::lint::rules::FailOn;

/// The GPUs and driver the image will run on.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Target GPUs by name, comma-separated (`H100,L4,"RTX 4090",A10G`; see `cudalint gpus`).
    /// `--gpus` is the same flag, spelled as the config key and the Action input are.
    #[arg(long, visible_alias = "gpus", value_delimiter = ',', env = "CUDALINT_GPU")]
    pub gpu: Vec<String>,
    /// Target architectures, comma-separated (`sm_90,8.9,sm_100f`; 'f' means its whole family).
    #[arg(long, value_delimiter = ',')]
    pub arch: Vec<String>,
    /// The targets' driver version (`535.104.05`).
    #[arg(long, conflicts_with = "cuda_driver", env = "CUDALINT_DRIVER")]
    pub driver: Option<String>,
    /// The targets' driver, as the CUDA version it reports (`12.2`).
    #[arg(long)]
    pub cuda_driver: Option<String>,
    /// Targets from `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv` output
    /// or `kubectl get nodes -o json` (GPU feature discovery labels). Repeatable.
    #[arg(long)]
    pub targets_from: Vec<String>,
}

impl TargetArgs {
    pub fn spec(&self) -> TargetSpec {
        TargetSpec {
            gpus: self.gpu.clone(),
            archs: self.arch.clone(),
            from: self.targets_from.clone(),
            driver: self.driver.clone(),
            cuda_driver: self.cuda_driver.clone(),
        }
    }
}

/// Which rules apply, how findings are filtered, and what fails the gate.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Configuration file (default: the nearest cudalint.toml from the current directory up to
    /// the repository root; the report's header names the one in use).
    #[arg(long, env = "CUDALINT_CONFIG")]
    pub config: Option<PathBuf>,
    /// A directory of additional rules (*.toml). Repeatable.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// A knowledge file (*.toml, as rules/knowledge/): its rows are added to the built-in ones, a
    /// row with the same key replacing it (a library that dispatches per GPU, a sibling loader, a
    /// consumer that compiles at run time). Repeatable; after the config's `[knowledge] extend`.
    #[arg(long, value_name = "FILE")]
    pub knowledge: Vec<PathBuf>,
    /// Ignore file: `[[ignore]]` tables (.cudalintignore.toml) or one `RULE [PATH-GLOB]
    /// [target=NAME] [exp:YYYY-MM-DD]` per line (.cudalintignore, as Trivy's; a line starting with
    /// `/PATH-GLOB` ignores every rule there). Default: the nearest of either, found as the
    /// configuration is.
    #[arg(long)]
    pub ignore_file: Option<PathBuf>,
    /// Report only findings not recorded in this baseline.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Exit 1 when a finding at or above this severity remains (default: error); `never` (or
    /// `none`) reports without failing.
    #[arg(long, value_parser = fail_on_parser(), ignore_case = true, env = "CUDALINT_FAIL_ON")]
    pub fail_on: Option<FailOn>,
}

impl PolicyArgs {
    /// [`PolicyArgs::load`] for a command that always judges (`registry`, `serve`): no targets
    /// is an error naming the ways to give them, never a run that judges nothing.
    pub fn load_with_targets(&self, targets: TargetSpec) -> anyhow::Result<Policy> {
        let policy = self.load(targets)?;
        if policy.targets.is_empty() {
            anyhow::bail!(no_targets(&policy));
        }
        Ok(policy)
    }

    /// The policy these flags and `targets` name, loaded (config, rules, ignores, baseline).
    pub fn load(&self, targets: TargetSpec) -> anyhow::Result<Policy> {
        // A value given here is named by its flag when it is wrong: a bare "No such file" from
        // a CI job's long command line does not say which of five paths it was.
        let files = [("--config", &self.config), ("--ignore-file", &self.ignore_file), ("--baseline", &self.baseline)];
        for (flag, p) in files.iter().filter_map(|(f, p)| p.as_ref().map(|p| (*f, p))) {
            // A path set for the whole job is named by its variable: no command line shows it.
            let from_env = flag == "--config" && std::env::var_os("CUDALINT_CONFIG").as_deref() == Some(p.as_os_str());
            let flag = if from_env { "CUDALINT_CONFIG" } else { flag };
            if !p.is_file() {
                anyhow::bail!("{flag} {}: {}", p.display(), missing(p));
            }
        }
        for d in &self.rules {
            if !d.is_dir() {
                anyhow::bail!("--rules {}: {}", d.display(), missing(d));
            }
        }
        for f in &self.knowledge {
            if !f.is_file() {
                anyhow::bail!("--knowledge {}: {}", f.display(), missing(f));
            }
        }
        for f in &targets.from {
            if !std::path::Path::new(f).is_file() {
                anyhow::bail!("--targets-from {f}: {}", missing(std::path::Path::new(f)));
            }
        }
        if let Some(d) = &targets.driver {
            crate::lint::targets::driver(d).map_err(|e| anyhow::anyhow!("--driver (or CUDALINT_DRIVER): {e}"))?;
        }
        Ok(Policy::load(&PolicySpec {
            config: self.config.clone(),
            rule_dirs: self.rules.clone(),
            knowledge: self.knowledge.clone(),
            ignore_file: self.ignore_file.clone(),
            baseline: self.baseline.clone(),
            fail_on: self.fail_on,
            search_from: std::env::current_dir().ok(),
            targets,
        })?)
    }
}

/// What is wrong with a path a flag gives: absent, or not of the kind the flag takes.
fn missing(p: &std::path::Path) -> &'static str {
    match std::fs::metadata(p) {
        Err(_) => "no such file or directory",
        Ok(m) if m.is_dir() => "a directory, where a file is wanted",
        Ok(_) => "not a directory",
    }
}

/// Why a scan with no targets stops (exit 2): it would judge nothing and say "passed".
pub fn no_targets(policy: &crate::lint::policy::Policy) -> String {
    let config = match &policy.files.config {
        Some(c) => format!("{c} has no [targets]"),
        None => format!(
            "no {} found from here up to the repository root (or here, outside a repository)",
            crate::lint::policy::CONFIG_FILE
        ),
    };
    format!(
        "no targets: a verdict needs the GPUs the image will run on. Give them on the command line \
         (--gpu H100,L4, --arch sm_90, or --targets-from nodes.json), in the environment \
         (CUDALINT_GPU=H100,L4), or in cudalint.toml ([targets] gpus = [\"H100\", \"L4\"]; {config}). \
         `cudalint support IMAGE` lists every GPU the image runs on; --format inventory, listing or \
         cyclonedx alone needs no targets"
    )
}

/// `--platform` where several may be chosen (`registry`, `serve`): platforms separated by
/// commas, as `--gpu` takes GPUs, each once in the order given (`scan_options` takes one).
pub fn platforms(v: Option<&str>) -> anyhow::Result<Vec<crate::image::Platform>> {
    let mut out: Vec<crate::image::Platform> = Vec::new();
    for p in v.into_iter().flat_map(|v| v.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        let p = crate::image::Platform::parse(p)?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// A flag whose values are the words of a `words!` enum (formats, severities): listed in
/// `--help` and completions as clap lists enum values (the library types carry no clap derive).
pub fn words_parser<T: crate::schema::Words + Clone>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::ALL.iter().map(|w| w.as_str()))
        .map(|name| name.parse::<T>().expect("a listed value"))
}

/// One `--format`: `FMT` (to standard output, or to the one `--output`) or `FMT=PATH`, Grype
/// and Syft's form, so that a report and its file are written side by side and cannot be
/// paired wrongly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report<T> {
    pub format: T,
    pub path: Option<PathBuf>,
}

/// The value parser of a `--format` flag over the words of `T`: the words are listed in
/// `--help` and completions; `=PATH` may follow any of them.
pub fn report_parser<T: crate::schema::Words + Clone>() -> ReportParser<T> {
    ReportParser(std::marker::PhantomData)
}

#[derive(Clone)]
pub struct ReportParser<T>(std::marker::PhantomData<T>);

impl<T: crate::schema::Words + Clone> clap::builder::TypedValueParser for ReportParser<T> {
    type Value = Report<T>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        // A file name that is not UTF-8 is refused rather than written under another name.
        let text = value.to_str().ok_or_else(|| {
            cmd.clone().error(clap::error::ErrorKind::InvalidUtf8, "--format FMT=PATH: PATH is not UTF-8")
        })?;
        let (word, path) = match text.split_once('=') {
            Some((w, p)) => (w, Some(p)),
            None => (text, None),
        };
        let format = words_parser::<T>().parse_ref(cmd, arg, std::ffi::OsStr::new(word))?;
        match path {
            Some("") => Err(cmd.clone().error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "--format {word}=: no file after '=' (write --format {word}=PATH, or --format {word} for standard output)"
                ),
            )),
            p => Ok(Report { format, path: p.map(PathBuf::from) }),
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(T::ALL.iter().map(|w| clap::builder::PossibleValue::new(w.as_str()))))
    }
}

/// `--fail-on`'s words, `none` and any case accepted as the config file accepts them.
fn fail_on_parser() -> impl clap::builder::TypedValueParser<Value = FailOn> {
    use clap::builder::{PossibleValue, TypedValueParser};
    let words = FailOn::ALL.iter().map(|w| match w {
        FailOn::Never => PossibleValue::new(w.as_str()).alias("none"),
        _ => PossibleValue::new(w.as_str()),
    });
    clap::builder::PossibleValuesParser::new(words).map(|s| FailOn::parse_loose(&s).expect("a listed value"))
}

/// `--verify`: the command line's spelling of [`crate::image::Verify`] (the library has no clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum VerifyArg {
    /// Hash every blob that is read whole anyway (compressed layers, streams, manifests,
    /// configs) against its digest; uncompressed layers read by seeking are not hashed. A
    /// layer's diff_id is checked where no blob digest authenticates it (legacy docker-archive
    /// layers).
    #[default]
    Auto,
    /// Hash every layer, reading uncompressed ones in full, and check compressed layers'
    /// diff_ids too (a second hash over every inflated byte).
    Always,
    /// Hash nothing.
    Never,
}

impl From<VerifyArg> for crate::image::Verify {
    fn from(v: VerifyArg) -> Self {
        match v {
            VerifyArg::Auto => crate::image::Verify::Auto,
            VerifyArg::Always => crate::image::Verify::Always,
            VerifyArg::Never => crate::image::Verify::Never,
        }
    }
}

/// How an image is read.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReadArgs {
    /// Platform to scan from a multi-platform image (os/arch[/variant]); default: this host's.
    /// For a lockfile, the platform whose wheels are installed (default linux/amd64).
    #[arg(long, env = "CUDALINT_PLATFORM")]
    pub platform: Option<String>,
    /// For a lockfile (pylock.toml, uv.lock, requirements.txt with hashes, pip's --report): the
    /// Python whose wheels are installed and whose markers hold (default 3.12).
    #[arg(long, value_name = "X.Y", env = "CUDALINT_PYTHON")]
    pub python: Option<String>,
    /// For a lockfile: the most a wheel whose size the lock does not give may be (a requirements
    /// file, pip's --report), refused at the byte past it (default 8G). A wheel whose size the
    /// lock gives is refused past that size.
    #[arg(long, value_name = "SIZE", value_parser = crate::layer::budget::parse_size)]
    pub max_wheel_size: Option<u64>,
    /// Which layer digests to check.
    #[arg(long, value_enum, default_value_t = VerifyArg::Auto)]
    pub verify: VerifyArg,
    /// Layers decoded (or downloaded) at once (default: the number of CPUs, at most 8).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// The scan's memory budget (256M, 1G, ...; default 256M): each layer's decoder window (a
    /// zstd window, an xz dictionary) and buffers are held from it, whatever --jobs is. A layer
    /// waits for room; one whose window can never fit is refused (exit 2). Also `memory = "512M"`
    /// in cudalint.toml.
    #[arg(long, env = "CUDALINT_MEMORY", value_name = "SIZE", value_parser = crate::layer::budget::parse_memory)]
    pub memory: Option<u64>,
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
    /// Where a bare IMAGE reference (`myimg:latest`, `registry/repo:tag`) is looked for, in
    /// order: the first store that runs here and holds it is read (Trivy's --image-src). Stores:
    /// docker (DOCKER_HOST), podman (CONTAINER_HOST, else the rootful or rootless socket),
    /// containerd (--containerd-address), remote (the registry).
    #[arg(
        long,
        env = "CUDALINT_IMAGE_SRC",
        value_delimiter = ',',
        value_name = "STORES",
        default_value = "docker,podman,containerd,remote",
        value_parser = parse_image_src
    )]
    pub image_src: Vec<crate::image::ImageSrc>,
    /// containerd's socket, for `containerd:NAME` and bare references (as `ctr --address`).
    #[arg(long, env = "CONTAINERD_ADDRESS", value_name = "PATH", default_value = crate::image::containerd::DEFAULT_ADDRESS)]
    pub containerd_address: PathBuf,
    /// containerd's namespace (as `ctr --namespace`): Docker's containerd keeps images in `moby`,
    /// Kubernetes' in `k8s.io`.
    #[arg(long, env = "CONTAINERD_NAMESPACE", value_name = "NS", default_value = crate::image::containerd::DEFAULT_NAMESPACE)]
    pub containerd_namespace: String,
}

fn parse_image_src(s: &str) -> Result<crate::image::ImageSrc, String> {
    s.trim().parse().map_err(|_| {
        let all: Vec<&str> = crate::image::ImageSrc::ALL.iter().map(|k| k.as_str()).collect();
        format!("{s:?} is not a store (one of {})", all.join(", "))
    })
}

/// How to reach registries (for IMAGE references like `registry/repo:tag`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RegistryArgs {
    /// User name for one registry (with --password-stdin): the one --registry-credentials
    /// names, else the registry of the image named on the command line (`registry`: the
    /// registry scanned; `audit`, whose images the manifests name: none, so
    /// --registry-credentials is needed). Never sent to another host, the --analysis-store
    /// included. Other registries use CUDALINT_REGISTRY_USERNAME/CUDALINT_REGISTRY_PASSWORD
    /// (for CUDALINT_REGISTRY_HOST only, if set; else as --username) or Docker's config.json
    /// and credential helpers.
    #[arg(long)]
    pub username: Option<String>,
    /// Read the password for --username from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
    /// The registry host[:port] that --username/--password-stdin are for, and the only one
    /// they are sent to (an --analysis-store on that host too).
    #[arg(long, value_name = "HOST")]
    pub registry_credentials: Option<String>,
    /// A registry host[:port] that may be reached over plain HTTP (loopback falls back to HTTP
    /// by itself). Repeatable.
    #[arg(long)]
    pub insecure_registry: Vec<String>,
    /// A host that may receive the registry credentials when a registry's token realm names it
    /// (over HTTPS only; a realm on the registry's own host needs no flag). Repeatable; e.g.
    /// `auth.docker.io` for Docker Hub with credentials.
    #[arg(long, value_name = "HOST")]
    pub allow_auth_host: Vec<String>,
    /// A PEM CA certificate to trust besides the system's. Repeatable.
    #[arg(long)]
    pub ca_cert: Vec<PathBuf>,
    /// Seconds a registry (or a lockfile's package index or wheel host) may take to deliver 16
    /// KiB of a response, or to answer at all, before the scan calls it stalled (exit 2).
    /// Default: 60.
    #[arg(long, value_name = "SECS")]
    pub registry_stall_timeout: Option<u64>,
    /// Seconds all registry requests for one image (or one registry listing, or one lockfile's
    /// index and wheel requests) may take in all (exit 2 when exceeded). Default: 3600.
    #[arg(long, value_name = "SECS")]
    pub registry_deadline: Option<u64>,
    /// Where layer analyses are cached (default: $XDG_CACHE_HOME/cudalint or ~/.cache/cudalint).
    /// Entries are authenticated with a key kept outside it: CUDALINT_CACHE_KEY (a secret of 16
    /// bytes or more), else $XDG_CONFIG_HOME/cudalint/cache.key (~/.config/...), made 0600 on
    /// first use. Processes sharing a cache directory share the key (a Kubernetes Job: one
    /// Secret); an entry written under another key is not trusted, its layer analysed again.
    #[arg(long, env = "CUDALINT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Neither read nor write the layer cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Seconds to wait for another process (a shard on the same cache directory, or one that
    /// claimed the layer in the --analysis-store) that is analysing a layer before analysing it
    /// here too: bounds the wait on a hung or killed holder. A killed holder's lock on a cache
    /// directory is released at once. Default: 600.
    #[arg(long, value_name = "SECS")]
    pub cache_lock_timeout: Option<u64>,
    /// A registry repository (HOST/NAME) that holds layer analyses shared between shards on
    /// different nodes: looked up by layer before pulling it, and written after analysing one.
    /// Only analyses signed by a --verify-key are believed (or any, with --trust-unsigned).
    #[arg(long, value_name = "REPO", env = "CUDALINT_ANALYSIS_STORE")]
    pub analysis_store: Option<String>,
    /// Layers smaller than this (compressed) are analysed without claiming them in the
    /// --analysis-store first: a claim costs about a second of settling, more than analysing a
    /// small layer twice. 0 claims every layer. Default: 32M.
    #[arg(long, value_name = "SIZE", value_parser = crate::layer::budget::parse_size)]
    pub store_claim_min: Option<u64>,
    /// Neither read nor write the --analysis-store (it may come from the environment).
    #[arg(long)]
    pub no_remote_cache: bool,
    /// Push an in-toto attestation of each registry image scanned (its inventory and the
    /// analysis of each layer), attached to the image manifest as an OCI referrer; `scan` and
    /// `support` also attach the image's support matrix beside it.
    #[arg(long)]
    pub attest: bool,
    /// Judge registry images from their cudalint attestation (made by this cudalint version
    /// with the same analysis options) without pulling any layer; none usable is exit 2.
    /// `support` prints the attached support matrix as it is, else judges the inventory one.
    #[arg(long, conflicts_with = "attest")]
    pub from_attestation: bool,
    /// Sign what --attest pushes with this key (unencrypted PEM ECDSA P-256, PKCS#8 as `openssl
    /// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes it or SEC1 as `openssl
    /// ecparam -genkey -name prime256v1 -noout` does): a DSSE envelope as cosign signs, which
    /// `cosign verify-attestation --key PUB` checks. A cosign key pair: docs/trust.md.
    #[arg(long, value_name = "FILE", env = "CUDALINT_SIGN_KEY")]
    pub sign_key: Option<std::path::PathBuf>,
    /// --from-attestation believes only statements signed by this public key (PEM; repeat for
    /// several): others are passed over with a note, and the image is read from its layers
    /// when none is left.
    #[arg(long, value_name = "FILE", env = "CUDALINT_VERIFY_KEY", value_delimiter = ',')]
    pub verify_key: Vec<std::path::PathBuf>,
    /// --from-attestation believes the newest statement that parses, signed or not (whoever can
    /// push to the repository decides the verdict); every report says so.
    #[arg(long, conflicts_with = "verify_key")]
    pub trust_unsigned: bool,
}

impl RegistryArgs {
    pub fn options(&self) -> anyhow::Result<crate::registry::RegistryOptions> {
        let mut o = crate::registry::RegistryOptions {
            username: self.username.clone(),
            credentials_host: self.registry_credentials.clone(),
            ..Default::default()
        };
        if self.password_stdin {
            let mut p = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut p).context("reading the password")?;
            o.password = Some(p.trim_end_matches(['\n', '\r']).to_string());
        }
        o.insecure = self.insecure_registry.clone();
        o.ca_certs = self.ca_cert.clone();
        o.allow_auth_hosts = self.allow_auth_host.clone();
        if let Some(s) = self.registry_stall_timeout {
            o.stall_timeout = std::time::Duration::from_secs(s.max(1));
        }
        if let Some(s) = self.registry_deadline {
            o.deadline = std::time::Duration::from_secs(s.max(1));
        }
        Ok(o)
    }

    /// The layer caches and attestations (`--cache-dir`, `--analysis-store`, `--attest`, ...)
    /// into `opts`, whose registry options are set.
    pub fn layer_options(&self, opts: &mut ScanOptions) -> anyhow::Result<()> {
        opts.attest = self.attest;
        opts.from_attestation = self.from_attestation;
        if let Some(k) = &self.sign_key {
            opts.sign =
                Some(std::sync::Arc::new(crate::image::sign::Signer::from_pem_file(k).map_err(anyhow::Error::msg)?));
        }
        opts.trust = if !self.verify_key.is_empty() {
            crate::image::sign::Trust::Keys(std::sync::Arc::new(
                crate::image::sign::Verifier::from_pem_files(&self.verify_key).map_err(anyhow::Error::msg)?,
            ))
        } else if self.trust_unsigned {
            crate::image::sign::Trust::Unsigned
        } else {
            crate::image::sign::Trust::Nothing
        };
        if self.from_attestation && matches!(opts.trust, crate::image::sign::Trust::Nothing) {
            anyhow::bail!(
                "--from-attestation believes only what a key signed: give --verify-key FILE (the public key of \
                 the --sign-key that --attest used), or --trust-unsigned to believe any statement pushed there"
            );
        }
        if !self.no_cache {
            opts.cache = self.cache_dir.clone().or_else(crate::cache::default_dir).map(|d| {
                let t =
                    self.cache_lock_timeout.map_or(crate::cache::DEFAULT_LOCK_TIMEOUT, std::time::Duration::from_secs);
                std::sync::Arc::new(crate::cache::LayerCache::new(d).with_lock_timeout(t))
            });
        }
        if let (Some(repo), false) = (&self.analysis_store, self.no_remote_cache) {
            if matches!(opts.trust, crate::image::sign::Trust::Nothing) {
                anyhow::bail!(
                    "--analysis-store believes only analyses a key signed: give --verify-key FILE (and --sign-key \
                     FILE to sign what this run stores), or --trust-unsigned to believe whatever it holds"
                );
            }
            let st = crate::image::analysis_store::AnalysisStore::connect(repo, &opts.registry)
                .with_context(|| format!("--analysis-store {}", crate::escape::text(repo)))?
                .with_claim_timeout(
                    self.cache_lock_timeout.map_or(crate::cache::DEFAULT_LOCK_TIMEOUT, std::time::Duration::from_secs),
                )
                .with_trust(opts.sign.clone(), opts.trust.clone())
                .with_claim_min(self.store_claim_min.unwrap_or(crate::image::analysis_store::CLAIM_MIN));
            opts.store = Some(std::sync::Arc::new(st));
        }
        Ok(())
    }
}

/// `config_memory`: the configuration's `memory`, used where `--memory` gives none.
pub fn scan_options(r: &ReadArgs, reg: &RegistryArgs, config_memory: Option<u64>) -> anyhow::Result<ScanOptions> {
    let mut opts = ScanOptions::default();
    if let Some(p) = &r.platform {
        opts.platform = Some(crate::image::Platform::parse(p)?);
    }
    opts.python = r.python.clone();
    if let Some(m) = r.max_wheel_size {
        opts.max_wheel = m;
    }
    opts.verify = r.verify.into();
    if let Some(j) = r.jobs {
        opts.jobs = j.max(1);
    }
    if let Some(m) = r.memory.or(config_memory) {
        opts.memory = std::sync::Arc::new(crate::layer::budget::MemoryBudget::new(m));
    }
    opts.progress = !r.quiet;
    opts.inspect.every_cubin = r.cubins;
    opts.inspect.lean = !r.deep;
    opts.registry = reg.options()?;
    opts.image_src = r.image_src.clone();
    opts.containerd = crate::image::containerd::Options {
        address: r.containerd_address.clone(),
        namespace: r.containerd_namespace.clone(),
    };
    reg.layer_options(&mut opts)?;
    Ok(opts)
}
