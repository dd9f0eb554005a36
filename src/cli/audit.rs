//! `cudalint audit`: Kubernetes manifests and nodes in, a verdict per workload, container and
//! GPU node pool out.

use std::process::ExitCode;

use anyhow::Context;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, scan_options};
use crate::audit::render::{self, AuditFormat};
use crate::audit::{self, AuditInput};
use crate::report::RenderConfig;

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// Workload manifests: multi-document YAML (`helm template` output, `kubectl get -o yaml`) or
    /// JSON (`kubectl get -o json`, `List` kinds included); a directory is read for *.yaml,
    /// *.yml and *.json; `-` is standard input. Deployment, StatefulSet, DaemonSet, ReplicaSet,
    /// Job, CronJob and Pod are audited; other kinds are skipped.
    #[arg(required = true)]
    pub manifests: Vec<String>,
    /// The cluster's nodes: `kubectl get nodes -o json` (GPU feature discovery labels). Repeatable.
    #[arg(long, required = true)]
    pub nodes: Vec<String>,
    /// Scan SPEC for the image written REF in the manifests (a local archive or OCI layout, a
    /// mirror: `--image nvcr.io/nvidia/tritonserver:25.01-py3=oci:./triton`). Repeatable.
    /// Unmapped references are pulled from their registry.
    #[arg(long = "image", value_name = "REF=SPEC")]
    pub image_map: Vec<String>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// A report: `FMT` to standard output, `FMT=PATH` to a file; repeat for several
    /// (`--format sarif=audit.sarif --format text`).
    #[arg(long, value_name = "FMT[=PATH]", value_parser = super::args::report_parser::<AuditFormat>())]
    pub format: Vec<super::args::Report<AuditFormat>>,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub fn run(a: AuditArgs) -> anyhow::Result<ExitCode> {
    // The pools are the targets: none come from the command line or the config file.
    let policy = a.policy.load(Default::default())?;
    let reports = a.out.plan(&a.format, AuditFormat::Text)?;
    let mut input = AuditInput { manifests: a.manifests.clone(), nodes: a.nodes.clone(), ..Default::default() };
    for m in &a.image_map {
        let (from, to) = m
            .split_once('=')
            .filter(|(f, t)| !f.is_empty() && !t.is_empty())
            .with_context(|| format!("--image {m:?}: expected REF=SPEC"))?;
        input.image_map.insert(from.to_string(), to.to_string());
    }
    let mut opts = scan_options(&a.read, &a.registry, policy.config.memory)?;
    // A manifest's image is what the cluster pulls: the registry's, not a local copy of the
    // same name (`--image REF=podman:NAME` maps one to a local store on purpose).
    opts.image_src = vec![crate::image::ImageSrc::Remote];
    opts.registry.images_named_by_input("audit").map_err(anyhow::Error::msg)?;
    let judge =
        |inv: &crate::image::ImageReport, targets: Vec<crate::lint::targets::Target>| policy.judge(inv, &targets, None);
    let report = audit::run(&input, &opts, &judge, policy.fail_on)?;
    for r in &reports {
        let to = r.path.as_deref();
        let cfg = RenderConfig { color: a.out.paint(to), rules: &policy.rules, ..Default::default() };
        a.out.emit(to, &render::render(r.format, &report, &cfg))?;
    }
    Ok(if report.incomplete {
        ExitCode::from(2)
    } else if report.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
