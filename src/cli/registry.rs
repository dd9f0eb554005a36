//! `cudalint registry`: scan every image of a registry (or a shard of them), one report per image
//! and a summary; `cudalint merge`: put the summaries of sharded runs back together.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;
use base64::Engine as _;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};
use super::write_stdout;
use crate::image::remote::Probe;
use crate::image::sign::Trust;
use crate::image::{Platform, ScanOptions};
use crate::lint::policy::Policy;
use crate::registry::catalog::{self, Selection};
use crate::report::registry::{self as summary, Change, ImageResult, Merger, RunStats, Since, Summary};

#[derive(clap::Args, Debug)]
// `--platform` is shared with `scan` (one platform, default the host's); here it takes several
// and defaults to all, so its help says so.
#[command(mut_arg("platform", |a| a.help(
    "Platforms to scan of multi-platform images (os/arch[/variant], comma-separated: linux/amd64,linux/arm64); \
     default: every platform the image has, each its own result. A tag that is one image is \
     scanned whatever its platform."
)))]
pub struct RegistryScanArgs {
    /// Registry host[:port].
    pub registry: String,
    /// Only repositories matching this glob (repeatable; default all).
    #[arg(long)]
    pub repo: Vec<String>,
    /// Only tags matching this glob (repeatable; default all).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Only the newest N tags of each repository, `latest` like any other: by the creation time
    /// in each tag's image config (its manifest and config are read, no layer), tags created at
    /// the same time in natural order (`v10` newer than `v9`). Tags whose creation time cannot be
    /// read sort last, as the oldest.
    #[arg(long)]
    pub newest: Option<usize>,
    /// Scan shard K of N (0-based K): `--shard 2/8`, or `--shard index/8` to take K from
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs). Images are assigned by a hash of their
    /// repository and tag (not the registry's address), so every run splits the same way.
    #[arg(long)]
    pub shard: Option<String>,
    /// Directory for one JSON report per image and summary.json.
    #[arg(long, default_value = "cudalint-reports")]
    pub output_dir: PathBuf,
    /// The summary.json of a previous run: only tags whose manifest digest changed (or that are
    /// new, or failed then) are judged again; the others' results and reports are carried over
    /// (reports copied from beside that summary). Every tag is judged again when the targets,
    /// rules, policy, knowledge, analysis options, platforms or cudalint version differ from that
    /// run's.
    /// For shards, give each shard its own previous summary (shards split the same way).
    #[arg(long, value_name = "SUMMARY")]
    pub since: Option<PathBuf>,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// summary.json files of sharded runs.
    #[arg(required = true)]
    pub summaries: Vec<PathBuf>,
    /// Write the merged summary here.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

fn exit_code(images: &[ImageResult]) -> ExitCode {
    if images.iter().any(|i| i.status == summary::ImageStatus::Error) {
        ExitCode::from(2)
    } else if images.iter().any(|i| i.status == summary::ImageStatus::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// What decides the verdicts of a run, hashed: the cudalint version, the targets, what fails the
/// gate, every rule (its file's text), rule settings, ignores of the ignore file and of the
/// configuration (and whether each has expired), the baseline, the knowledge base (its digest:
/// the built-in rows and every `--knowledge` and `[knowledge] extend` file), the analysis
/// options, which attestations and stored analyses are believed (where any are read), the Python
/// and the platforms asked for. `--since`
/// carries results over only between runs with the same fingerprint.
fn fingerprint(policy: &Policy, opts: &ScanOptions, platforms: &[Platform]) -> String {
    use std::fmt::Write;
    let mut h = String::new();
    let _ = writeln!(h, "cudalint {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(h, "targets {}", serde_json::to_string(&policy.targets).unwrap_or_default());
    let _ = writeln!(h, "fail-on {}", policy.fail_on);
    for r in &policy.rules {
        let builtin = crate::lint::rules::BUILTIN_RULES.iter().find(|(n, _)| r.source == format!("rules/{n}"));
        let text = match builtin {
            Some((_, t)) => t.to_string(),
            None => std::fs::read_to_string(&r.source).unwrap_or_else(|_| r.when_src.clone()),
        };
        let _ = writeln!(h, "rule {} {} {}", r.code, r.severity, crate::digest::sha256(text.as_bytes()));
    }
    let _ = writeln!(h, "disable {:?} severity {:?}", policy.config.disable, policy.config.severity);
    let today = crate::lint::config::today();
    for i in &policy.ignores {
        let _ = writeln!(h, "ignore {:?} expired {}", i.entry, i.expired(today));
    }
    for i in &policy.config.ignores {
        let _ = writeln!(h, "config ignore {:?} expired {}", i.entry, i.expired(today));
    }
    let _ = writeln!(h, "baseline {:?}", policy.baseline);
    // A knowledge row decides which files are kept and how a library is gated.
    let _ = writeln!(h, "knowledge {}", crate::knowledge::get().digest);
    let _ = writeln!(h, "analysis {}", crate::cache::variant(&opts.inspect));
    // Which statements and stored analyses were believed, where any were read (the trust
    // that checks the previous summary itself decides no verdict).
    let _ = writeln!(h, "from-attestation {} store {}", opts.from_attestation, opts.store.is_some());
    if opts.from_attestation || opts.store.is_some() {
        let _ = writeln!(h, "trust {}", opts.trust.fingerprint());
    }
    let _ = writeln!(h, "python {:?}", opts.python);
    let _ = writeln!(h, "platforms {}", platforms.iter().map(Platform::to_string).collect::<Vec<_>>().join(","));
    crate::digest::sha256(h.as_bytes())
}

/// What a summary's signature (`summary.json.sig`, base64) is made over: its bytes, as this
/// payload type's DSSE encoding.
const SUMMARY_PAYLOAD: &str = "application/vnd.cudalint.registry-summary+json";

/// The previous run `--since` names: its results by image, where its reports lie, and why none
/// can be carried over (its fingerprint differs, or no --verify-key signed it), if so.
struct Previous {
    given: String,
    dir: PathBuf,
    images: std::collections::BTreeMap<String, Vec<ImageResult>>,
    all_rejudged: Option<String>,
}

impl Previous {
    fn load(path: &Path, registry: &str, fingerprint: &str, trust: &Trust) -> anyhow::Result<Previous> {
        let given = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("--since {given}"))?;
        // Whoever can write the reports volume could flip a status: only a summary a key
        // signed carries anything over.
        let unsigned = match trust {
            Trust::Nothing => anyhow::bail!(
                "--since {given}: --since believes only a summary a key signed: give --verify-key FILE (the public \
                 key of the --sign-key that run used), or --trust-unsigned"
            ),
            Trust::Unsigned => None,
            Trust::Keys(keys) => {
                let sig_path = format!("{}.sig", path.display());
                let sig = std::fs::read_to_string(&sig_path)
                    .ok()
                    .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s.trim()).ok());
                match sig {
                    Some(sig) if keys.verifies(SUMMARY_PAYLOAD, text.as_bytes(), &sig) => None,
                    Some(_) => Some(format!("its signature ({sig_path}) does not verify against the --verify-key")),
                    None => Some(format!("it is not signed (no readable {sig_path})")),
                }
            }
        };
        if let Some(why) = &unsigned {
            eprintln!("cudalint: note: --since {}: {why}: every tag is judged again", crate::escape::text(&given));
        }
        let s = summary::read(&given, &text)?;
        if s.registry != registry {
            anyhow::bail!(
                "--since {given}: a summary of registry {}, not {}",
                crate::escape::text(&s.registry),
                crate::escape::text(registry)
            );
        }
        let all_rejudged = match &s.fingerprint {
            Some(f) if f == fingerprint => None,
            Some(_) => Some(
                "the targets, rules, policy, knowledge, analysis options, platforms or cudalint version differ from \
                 that run's"
                    .to_string(),
            ),
            None => Some("that summary records no fingerprint".to_string()),
        };
        let all_rejudged = unsigned.or(all_rejudged);
        let mut images: std::collections::BTreeMap<String, Vec<ImageResult>> = Default::default();
        for i in s.images {
            images.entry(i.image.clone()).or_default().push(i);
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Previous { given, dir, images, all_rejudged })
    }

    /// How the tag `image`, whose manifest digest is now `digest`, relates to the previous run.
    fn change(&self, image: &str, digest: Option<&str>) -> Change {
        match (self.images.get(image), digest) {
            (None, _) => Change::New,
            (Some(rows), Some(d)) if rows.iter().any(|r| r.digest.as_deref() != Some(d)) => Change::Changed,
            // The same digest, or none read now (its manifest could not be read): judged again.
            (Some(_), _) => Change::Rejudged,
        }
    }

    /// The previous results of `image`, marked carried, when they can be: the same digest and
    /// fingerprint, judged (no error), each report still beside the previous summary (copied
    /// into `out`, unless that is where it lies).
    fn carry(&self, image: &str, digest: &str, out: &Path) -> anyhow::Result<Option<Vec<ImageResult>>> {
        let Some(rows) = self.images.get(image) else { return Ok(None) };
        let same = rows.iter().all(|r| {
            r.digest.as_deref() == Some(digest)
                && matches!(r.status, summary::ImageStatus::Pass | summary::ImageStatus::Fail)
                && r.report.as_deref().is_some_and(|f| self.dir.join(f).is_file())
        });
        if self.all_rejudged.is_some() || !same {
            return Ok(None);
        }
        let here = |d: &Path| std::fs::canonicalize(if d.as_os_str().is_empty() { Path::new(".") } else { d }).ok();
        let copy = here(&self.dir) != here(out);
        let mut carried = Vec::new();
        for r in rows {
            let name = r.report.as_deref().expect("checked above");
            let from = self.dir.join(name);
            let bytes = std::fs::read(&from).with_context(|| from.display().to_string())?;
            // The summary vouches for its reports by their digests: one edited since (or from
            // a summary that records none) is judged again, not carried.
            if r.report_digest.as_deref() != Some(crate::digest::sha256(&bytes).as_str()) {
                return Ok(None);
            }
            if copy {
                crate::cache::write_new_file(out, name, &bytes)
                    .with_context(|| format!("{} to {}", from.display(), out.join(name).display()))?;
            }
            carried.push(ImageResult { change: Some(Change::Carried), ..r.clone() });
        }
        Ok(Some(carried))
    }
}

pub fn run(mut a: RegistryScanArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load_with_targets(a.targets.spec())?;
    // Several platforms: parsed here, not by `scan_options` (which takes one).
    let chosen = super::args::platforms(a.read.platform.take().as_deref())?;
    let mut opts = scan_options(&a.read, &a.registry_args, policy.config.memory)?;
    opts.progress = false;
    // The registry's own images, not local copies of the same names.
    opts.image_src = vec![crate::image::ImageSrc::Remote];
    let shard = a.shard.as_deref().map(crate::registry::shard::parse).transpose()?;
    let fingerprint = fingerprint(&policy, &opts, &chosen);
    let previous = a.since.as_deref().map(|p| Previous::load(p, &a.registry, &fingerprint, &opts.trust)).transpose()?;
    // The analysis store, when it lives in the registry being scanned, is not scanned itself.
    let own_store = a.registry_args.analysis_store.as_deref().and_then(|s| s.strip_prefix(&format!("{}/", a.registry)));
    let exclude = own_store.map(str::to_string).into_iter().collect();
    let sel = Selection { repos: a.repo.clone(), tags: a.tag.clone(), newest: a.newest, shard, exclude };
    // An index is dated by the platform asked for first, else the host's (else its first).
    let prefer = chosen.first().cloned().unwrap_or_else(Platform::host);
    let quiet = a.read.quiet;
    let mut created = |repo: &str, tags: &[String]| -> Vec<Option<String>> {
        let note = |tag: &str, why: &str| {
            if !quiet {
                eprintln!(
                    "cudalint: {}/{}:{}: no creation time ({why}); --newest counts it as oldest",
                    a.registry,
                    crate::escape::text(repo),
                    crate::escape::text(tag)
                );
            }
        };
        match crate::image::remote::creation_times(&a.registry, repo, tags, &prefer, &opts) {
            Ok(times) => tags
                .iter()
                .zip(times)
                .map(|(tag, t)| match t {
                    Ok(Some(t)) if catalog::parse_time(&t).is_some() => Some(t),
                    Ok(Some(t)) => {
                        note(tag, &format!("{:?} is not an RFC 3339 time", crate::escape::text(&t)));
                        None
                    }
                    Ok(None) => {
                        note(tag, "its image config has none");
                        None
                    }
                    Err(e) => {
                        note(tag, &e.to_string());
                        None
                    }
                })
                .collect(),
            Err(e) => {
                let e = e.to_string();
                tags.iter().for_each(|t| note(t, &e));
                vec![None; tags.len()]
            }
        }
    };
    let images = catalog::list(&a.registry, &sel, &opts.registry, &mut created).with_context(|| a.registry.clone())?;
    std::fs::create_dir_all(&a.output_dir).with_context(|| a.output_dir.display().to_string())?;
    let mut results = Vec::new();
    for image in images {
        // A failure of one image (or platform) is recorded and the run goes on (exit 2 at the end).
        let (digest, platforms) = match crate::image::remote::probe(&image, &opts) {
            Ok(Probe::NotImage { digest, what }) => {
                if !a.read.quiet {
                    eprintln!("cudalint: skipping {}: not an image ({what})", crate::escape::text(&image));
                }
                results.push(ImageResult::skipped(&image, digest, &what.to_string()));
                continue;
            }
            Ok(Probe::Image { digest, platforms }) => (digest, platforms),
            Err(e) => {
                let change = previous.as_ref().map(|p| p.change(&image, None));
                results.push(ImageResult { change, ..ImageResult::failed(&image, None, e.to_string()) });
                continue;
            }
        };
        if let Some(p) = &previous
            && let Some(rows) = p.carry(&image, &digest, &a.output_dir)?
        {
            results.extend(rows);
            continue;
        }
        let change = previous.as_ref().map(|p| p.change(&image, Some(&digest)));
        let row = |r: ImageResult| ImageResult { digest: Some(digest.clone()), change, ..r };
        if !a.read.quiet {
            eprintln!("cudalint: scanning {}", crate::escape::text(&image));
        }
        let platforms = match platforms {
            None => vec![None],
            Some(offered) => {
                let scanned: Vec<Option<Platform>> = offered
                    .iter()
                    .filter(|p| chosen.is_empty() || chosen.iter().any(|c| c.accepts(p)))
                    .cloned()
                    .map(Some)
                    .collect();
                if scanned.is_empty() {
                    let e = crate::image::ScanError::Platform {
                        wanted: chosen.iter().map(Platform::to_string).collect::<Vec<_>>().join(", "),
                        available: offered.iter().map(Platform::to_string).collect(),
                    };
                    results.push(row(ImageResult::failed(&image, None, e.to_string())));
                    continue;
                }
                if !a.read.quiet {
                    let names: Vec<String> = scanned.iter().flatten().map(Platform::to_string).collect();
                    eprintln!(
                        "cudalint: {}: {} of its {} platforms: {}",
                        crate::escape::text(&image),
                        scanned.len(),
                        offered.len(),
                        names.join(", ")
                    );
                }
                scanned
            }
        };
        for platform in platforms {
            opts.platform = platform.clone();
            let label = platform.as_ref().map(Platform::to_string);
            let result = match crate::image::remote::scan(&image, &opts)
                .map_err(|e| e.to_string())
                .and_then(|inv| policy.judge(&inv, &policy.targets, None).map_err(|e| e.to_string()))
            {
                Ok(report) => {
                    let name = summary::report_file_name(&image, label.as_deref());
                    let json = crate::report::json::render(&report, &Default::default())?;
                    // Never through a link planted in a shared --output-dir; a report that cannot
                    // be written is this image's failure, not the run's.
                    match crate::cache::write_new_file(&a.output_dir, &name, json.as_bytes()) {
                        Ok(()) => ImageResult::judged(&image, label, &report, name, json.as_bytes()),
                        Err(e) => ImageResult::failed(
                            &image,
                            label,
                            format!("its report {}: {e}", a.output_dir.join(&name).display()),
                        ),
                    }
                }
                Err(e) => ImageResult::failed(&image, label, e),
            };
            results.push(row(result));
        }
    }
    let counts = &opts.counts;
    let mut stats = RunStats {
        layers_pulled: counts.pulled.load(Ordering::Relaxed),
        layers_analysed: counts.analysed.load(Ordering::Relaxed),
        ..Default::default()
    };
    if let Some(c) = &opts.cache {
        let cs = c.stats();
        stats.cache_hits = cs.hits.load(Ordering::Relaxed);
        stats.lock_waits = cs.lock_waits.load(Ordering::Relaxed);
        stats.stale_locks = cs.stale_locks.load(Ordering::Relaxed);
    }
    if let Some(st) = &opts.store {
        stats.store_hits = st.hits.load(Ordering::Relaxed);
        stats.store_pushed = st.pushed.load(Ordering::Relaxed);
        stats.store_claim_waits = st.claim_waits.load(Ordering::Relaxed);
        stats.store_lookups = st.lookups();
        stats.store_unreachable = u64::from(st.unreachable());
        stats.store_untrusted = st.untrusted();
    }
    let since = previous.map(|p| Since::count(p.given, &results, p.all_rejudged));
    let believes_unsigned = opts.store.is_some() || a.since.is_some();
    stats.unsigned_trust = u64::from(believes_unsigned && matches!(opts.trust, Trust::Unsigned));
    let doc = Summary {
        schema: crate::schema::REGISTRY_SUMMARY.into(),
        registry: a.registry.clone(),
        shards: shard.map(|(k, n)| vec![format!("{k}/{n}")]).unwrap_or_default(),
        images: results,
        stats,
        fingerprint: Some(fingerprint),
        since,
    };
    // Like the reports: never through a link planted in a shared --output-dir.
    let json = summary::json(&doc);
    crate::cache::write_new_file(&a.output_dir, "summary.json", json.as_bytes())
        .with_context(|| a.output_dir.join("summary.json").display().to_string())?;
    if let Some(k) = &opts.sign {
        // Beside it, so a later `--since --verify-key` can tell it from one edited after.
        let sig = base64::engine::general_purpose::STANDARD.encode(k.sign(SUMMARY_PAYLOAD, json.as_bytes()));
        crate::cache::write_new_file(&a.output_dir, "summary.json.sig", format!("{sig}\n").as_bytes())
            .with_context(|| a.output_dir.join("summary.json.sig").display().to_string())?;
    }
    write_stdout(&summary::text(&doc))?;
    Ok(exit_code(&doc.images))
}

pub fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut merger = Merger::default();
    for p in &a.summaries {
        let text = std::fs::read_to_string(p).with_context(|| p.display().to_string())?;
        merger.add(&p.display().to_string(), &text)?;
    }
    let merged = merger.finish()?;
    if let Some(o) = &a.output {
        // The user's own path (it may be /dev/stdout): written as given.
        std::fs::write(o, summary::json(&merged)).with_context(|| o.display().to_string())?;
    }
    write_stdout(&summary::text(&merged))?;
    Ok(exit_code(&merged.images))
}
