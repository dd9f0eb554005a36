//! The HTML report in a real headless Chromium (Debian's `chromium`): every binary and target is
//! in the grid, each cell's computed colour is its verdict class's colour, each colour has its
//! own mark and every mark a legend entry, only partial cells are outlined and only failing
//! targets' cells edged (which also proves the page's own strict CSP admits its style), failing
//! targets' columns are in view at 1400 px with the binary column sticky, the findings are
//! grouped by target and cause, and a screenshot is written under target/.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cudalint::lint::coverage::Class;
use cudalint::report::html::{colours, css_class};
use serde_json::Value;

use crate::util::{fixture, root};

/// A root filesystem with binaries whose cells on these targets are native, JIT, gated, none,
/// n/a and partial, under long directories as in a Python environment: (fixture, file name).
// libstale.so: one translation unit on a stale list, the partial cell (some modules fail on H100).
// The two bitsandbytes-style siblings are libstale.so too: the one the loader does not pick is
// n/a with its modules' share still `some`, which is not partial.
const FILES: [(&str, &str); 14] = [
    ("libmulti.so", "libmulti.so"),
    ("libpartial.so", "libpartial.so"),
    ("libsm100f.so", "libsm100f.so"),
    ("libsm90a.so", "libsm90a.so"),
    ("libdebug.so", "libdebug.so"),
    ("libzstd.so", "libzstd.so"),
    ("vecadd.ptx", "vecadd.ptx"),
    ("../verdict/libstale.so", "libstale.so"),
    ("../verdict/libgenmixed.so", "libgenmixed.so"),
    ("../verdict/libperarch.so", "libperarch.so"),
    ("../verdict/libortlike.so", "libortlike.so"),
    ("../verdict/libbigptx.so", "libbigptx.so"),
    ("../verdict/libstale.so", "libbitsandbytes_cuda121.so"),
    ("../verdict/libstale.so", "libbitsandbytes_cuda124.so"),
];
/// Where they go, in turn: long paths that, unbroken, used to push the targets off the page.
const DIRS: [&str; 2] = [
    "usr/local/lib/python3.12/dist-packages/an_inference_framework_with_a_long_name/_compiled_extensions/lib",
    "opt/conda/envs/serving-environment/lib/python3.12/site-packages/vendored_attention_and_moe_kernels/lib",
];
/// Some fail (V100, T4, B200, RTX 5090), some run (L4, H100), the last one given fails.
const GPUS: &str = "V100,T4,L4,H100,B200,RTX 5090";

fn rootfs(dir: &Path) -> PathBuf {
    for (i, (f, name)) in FILES.iter().enumerate() {
        // Siblings share a directory: the loader picks among the files beside each other.
        let lib = dir.join("rootfs").join(DIRS[if name.contains("_cuda") { 0 } else { i % 2 }]);
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::copy(fixture(f), lib.join(name)).unwrap_or_else(|e| panic!("fixture {f}: {e}"));
    }
    dir.join("rootfs")
}

/// `html` and `json` reports of one scan.
fn reports(dir: &Path) -> (PathBuf, Value) {
    let html = dir.join("report.html");
    let json = dir.join("report.json");
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .arg("scan")
        .arg(format!("dir:{}", rootfs(dir).display()))
        .args(["--gpu", GPUS, "--quiet", "--format"])
        .arg(format!("html={}", html.display()))
        .arg("--format")
        .arg(format!("json={}", json.display()))
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    (html, serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap())
}

/// One report of a scan of `rootfs` in `format`, written to `out`.
fn report(rootfs: &Path, format: &str, out: &Path) {
    let run = Command::cargo_bin("cudalint")
        .unwrap()
        .arg("scan")
        .arg(format!("dir:{}", rootfs.display()))
        .args(["--gpu", GPUS, "--quiet", "--format", format, "--output"])
        .arg(out)
        .output()
        .unwrap();
    assert!(matches!(run.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&run.stderr));
}

fn chromium(args: &[&str]) -> String {
    let bin = crate::scan::which("chromium");
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Loads `page` in an iframe `width` px wide and 900 high in a probe page (the report itself runs
/// no script) and returns what Chromium rendered: the grid's targets, rows and cells (class,
/// background, outline, mark), the headers' boxes and the viewport, the legend's marks, the
/// findings' groups, and whether the binary column stays put when the grid scrolls sideways.
fn rendered(page: &Path, width: u32) -> Value {
    let probe = page.with_file_name("probe.html");
    let name = page.file_name().unwrap().to_string_lossy();
    std::fs::write(
        &probe,
        format!(
            r#"<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="{name}" width="{width}" height="900" style="border:0"></iframe>
<pre id="out">pending</pre><script>
document.getElementById('f').addEventListener('load', () => {{
  const d = document.getElementById('f').contentDocument;
  const box = e => {{ const r = e.getBoundingClientRect(); return {{left: r.left, right: r.right, top: r.top, bottom: r.bottom}}; }};
  const mark = e => {{ const m = e.querySelector('.mark'); return m ? m.textContent : null; }};
  const cells = [...d.querySelectorAll('#matrix td.cell')].map(td => ({{
    path: td.parentElement.dataset.path, target: td.dataset.target, class: td.dataset.class,
    title: td.title, bg: getComputedStyle(td).backgroundColor,
    outline: getComputedStyle(td).outlineStyle, shadow: getComputedStyle(td).boxShadow, mark: mark(td) }}));
  const targets = [...d.querySelectorAll('#matrix th[data-target]')].map(th => th.dataset.target);
  const heads = [...d.querySelectorAll('#matrix th[data-target]')].map(th => ({{
    target: th.dataset.target, mark: mark(th), box: box(th) }}));
  const headlines = [...d.querySelectorAll('#headlines li')].map(li => ({{ target: li.dataset.target, mark: mark(li) }}));
  const rows = [...d.querySelectorAll('#matrix tbody tr')].map(tr => tr.dataset.path);
  const findings = d.querySelectorAll('#findings .finding').length;
  const groups = [...d.querySelectorAll('#findings details')].map(x => ({{
    target: x.closest('section').dataset.target, rule: x.dataset.rule, open: x.open,
    fingerprints: [...x.querySelectorAll('.finding')].map(li => li.dataset.fingerprint) }}));
  const legend = [...d.querySelectorAll('#legend li[data-mark]')].map(li => ({{
    for: li.dataset.for, mark: li.dataset.mark, outline: getComputedStyle(li.querySelector('.swatch')).outlineStyle }}));
  const view = {{ width: d.documentElement.clientWidth, height: d.documentElement.clientHeight }};
  const grid = d.querySelector('.grid');
  const bin = d.querySelector('#matrix tbody td.bin');
  const before = box(bin).left;
  grid.scrollLeft = grid.scrollWidth;
  const sticky = {{ position: getComputedStyle(bin).position, overflows: grid.scrollWidth > grid.clientWidth,
    scrolled: grid.scrollLeft, before, after: box(bin).left }};
  grid.scrollLeft = 0;
  document.getElementById('out').textContent = JSON.stringify({{targets, heads, headlines, rows, cells, findings,
    groups, legend, view, grid: box(grid), sticky}});
}});
</script></body></html>"#
        ),
    )
    .unwrap();
    let url = format!("file://{}", probe.display());
    let dom = chromium(&["--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom", &url]);
    let start = dom.find("<pre id=\"out\">").expect("probe output in the DOM") + "<pre id=\"out\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text = dom[start..end].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("probe wrote {text:?}: {e}"))
}

fn rgb(hex: &str) -> String {
    let v = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    format!("rgb({}, {}, {})", v(1), v(3), v(5))
}

#[test]
fn report_renders_in_chromium_with_the_verdict_colours() {
    let dir = tempfile::tempdir().unwrap();
    let (html, report) = reports(dir.path());
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing the browser would fetch.
    for outside in ["src=", "href=", "@import", "url(", "<script"] {
        assert!(!page.contains(outside), "the report references something outside itself: {outside}");
    }
    let seen = rendered(&html, 1400);
    assert_eq!(strings(&seen["targets"]), columns(&report), "failing targets first, then the others, as given");
    let rows: Vec<&str> = report["matrix"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), FILES.len(), "every binary with device code has a row: {rows:?}");
    assert_eq!(strings(&seen["rows"]), rows);

    let mut classes = BTreeSet::new();
    // Each class's marks, and the partial cells' marks: the grid read without its colours.
    let mut marks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let cells = seen["cells"].as_array().unwrap();
    assert_eq!(cells.len(), rows.len() * seen["targets"].as_array().unwrap().len());
    for row in report["matrix"].as_array().unwrap() {
        for c in row["cells"].as_array().unwrap() {
            let got = cells
                .iter()
                .find(|x| x["path"] == row["path"] && x["target"] == c["target"])
                .unwrap_or_else(|| panic!("no cell for {} on {}", row["path"], c["target"]));
            let class = c["class"].as_str().unwrap();
            assert_eq!(got["class"], class);
            let (bg, _) = colours(class.parse::<Class>().expect("a verdict class"));
            assert_eq!(got["bg"].as_str().unwrap(), rgb(bg), "{} on {}: {class}", row["path"], c["target"]);
            assert!(
                got["title"].as_str().unwrap().starts_with(&format!("{} modules", row["modules"])),
                "module count on hover: {}",
                got["title"]
            );
            // Partial: some modules fail and the binary runs there. A binary judged gated or n/a
            // after counting keeps the share `some` but is not partly failing: no outline.
            let some = c["result"] == "some";
            let partial = some && (class == "native" || class == "jit");
            assert_eq!(
                got["outline"] == "dashed",
                partial,
                "{} on {} ({class}, share {}): outlined only where some modules fail and the rest run",
                row["path"],
                c["target"],
                c["result"]
            );
            if partial {
                let text = c["text"].as_str().unwrap();
                assert!(text.contains("✗ ") && text.contains('/'), "a partial cell says how many fail: {text}");
            }
            // A failing target's column is edged red, whatever the cell's own class.
            let failing_column = failing(&report).contains(&c["target"].as_str().unwrap());
            assert_eq!(
                got["shadow"] != "none",
                failing_column,
                "{} on {}: {}",
                row["path"],
                c["target"],
                got["shadow"]
            );
            let mark = got["mark"].as_str().unwrap_or_else(|| panic!("no mark in {got}")).to_string();
            let key = if partial { "partial".to_string() } else { class.to_string() };
            marks.entry(key).or_default().insert(mark);
            classes.insert(class.to_string());
            if partial {
                classes.insert("partial".into());
            } else if some {
                classes.insert("some, not partial".into());
            }
        }
    }
    for want in ["native", "jit", "none", "n/a", "arch-gated", "partial", "some, not partial"] {
        assert!(classes.contains(want), "the case should show a {want} cell: {classes:?}");
    }
    // One mark per class, none shared: the mark alone tells the class.
    let all: BTreeSet<&String> = marks.values().flatten().collect();
    assert!(marks.values().all(|m| m.len() == 1) && all.len() == marks.len(), "marks by class: {marks:?}");
    // Every mark on the grid has its legend entry, and the partial one shows the outline.
    let legend = seen["legend"].as_array().unwrap();
    let entry = |of: &str, mark: &str| legend.iter().find(|l| l["for"] == of && l["mark"] == mark);
    for (key, m) in &marks {
        let m = m.iter().next().unwrap();
        let e = entry("cell", m).unwrap_or_else(|| panic!("no legend entry for {key}'s mark {m}: {legend:?}"));
        assert_eq!(e["outline"] == "dashed", key == "partial", "{key}'s legend entry: {e}");
    }
    let listed: BTreeSet<&str> =
        legend.iter().filter(|l| l["for"] == "cell").map(|l| l["mark"].as_str().unwrap()).collect();
    assert_eq!(listed, all.iter().map(|m| m.as_str()).collect(), "the legend lists the cell marks used, no others");
    for h in seen["heads"].as_array().unwrap().iter().chain(seen["headlines"].as_array().unwrap()) {
        let m = h["mark"].as_str().unwrap_or_else(|| panic!("no mark on target {h}"));
        assert!(entry("target", m).is_some(), "no legend entry for target mark {m}: {legend:?}");
    }
    assert_eq!(
        legend.len(),
        legend.iter().map(|l| (l["for"].to_string(), l["mark"].to_string())).collect::<BTreeSet<_>>().len(),
        "one legend entry per mark: {legend:?}"
    );

    // A page whose style no longer matches the hash in its CSP renders without colours: the
    // check above would catch a CSP that blocks the style.
    let tampered = html.with_file_name("tampered.html");
    std::fs::write(&tampered, page.replacen("body{", "body {", 1)).unwrap();
    let t = rendered(&tampered, 1400);
    let native = t["cells"].as_array().unwrap().iter().find(|x| x["class"] == "native").unwrap();
    assert_eq!(native["bg"], "rgba(0, 0, 0, 0)", "CSP should block a style not in its hash");
    assert!(page.contains(&format!(".{}{{", css_class(Class::NotApplicable))));

    let shot = root().join("target/cudalint-report.png");
    let _ = std::fs::remove_file(&shot);
    let arg = format!("--screenshot={}", shot.display());
    chromium(&[&arg, "--window-size=1400,1000", &format!("file://{}", html.display())]);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "screenshot {}", shot.display());
    println!("screenshot: {}", shot.display());
}

/// Strings of a JSON array.
fn strings(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect()
}

/// Targets whose headline verdict is `fails`.
fn failing(report: &Value) -> Vec<&str> {
    report["headlines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["verdict"] == "fails")
        .map(|h| h["target"].as_str().unwrap())
        .collect()
}

/// The grid's columns: failing targets first, then the others, each in the order given.
fn columns(report: &Value) -> Vec<&str> {
    let fails = failing(report);
    let given = report["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap());
    let (mut first, rest): (Vec<&str>, Vec<&str>) = given.partition(|t| fails.contains(t));
    first.extend(rest);
    first
}

/// The HTML and JSON reports of one scan of [`FILES`], one format per command.
fn html_and_json(dir: &Path) -> (PathBuf, Value) {
    let rootfs = rootfs(dir);
    let (html, json) = (dir.join("report.html"), dir.join("report.json"));
    report(&rootfs, "html", &html);
    report(&rootfs, "json", &json);
    (html, serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap())
}

#[test]
fn failing_targets_are_in_view_at_1400_px_and_the_binary_column_is_sticky() {
    let dir = tempfile::tempdir().unwrap();
    let (html, report) = html_and_json(dir.path());
    let fails = failing(&report);
    let given: Vec<&str> = report["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(given, GPUS.split(',').collect::<Vec<_>>());
    // The case: several failing targets, the last one given among them (a layout in the order
    // given, after the binary, layer and package columns, put it out of view).
    assert!(fails.len() >= 3 && fails.contains(given.last().unwrap()), "failing: {fails:?}");

    let seen = rendered(&html, 1400);
    let (view, grid) = (&seen["view"], &seen["grid"]);
    let right = view["width"].as_f64().unwrap().min(grid["right"].as_f64().unwrap());
    assert!(right > 1300.0, "the grid spans the page: {grid} in {view}");
    for t in &fails {
        let head = seen["heads"].as_array().unwrap().iter().find(|h| h["target"] == *t).unwrap();
        let b = &head["box"];
        let (l, r, top, bottom) = (
            b["left"].as_f64().unwrap(),
            b["right"].as_f64().unwrap(),
            b["top"].as_f64().unwrap(),
            b["bottom"].as_f64().unwrap(),
        );
        assert!(
            l >= grid["left"].as_f64().unwrap()
                && r <= right
                && top >= 0.0
                && bottom <= view["height"].as_f64().unwrap(),
            "{t}'s column header at {b} is out of view (viewport {view}, grid {grid})"
        );
        assert_eq!(head["mark"], "✗", "{t}'s header says it fails");
    }

    // Narrower, the grid scrolls sideways inside its box and the binary column stays put.
    let narrow = rendered(&html, 700);
    let s = &narrow["sticky"];
    assert_eq!(s["position"], "sticky");
    assert!(s["overflows"] == true && s["scrolled"].as_f64().unwrap() > 100.0, "the grid should scroll at 700 px: {s}");
    assert!((s["after"].as_f64().unwrap() - s["before"].as_f64().unwrap()).abs() < 1.0, "binary column moved: {s}");
}

#[test]
fn findings_are_grouped_by_target_and_cause_and_collapsed() {
    let dir = tempfile::tempdir().unwrap();
    let (html, report) = html_and_json(dir.path());
    let seen = rendered(&html, 1400);
    // Findings whose cause another one says once are folded into it on the page.
    let shown: Vec<&Value> = report["findings"].as_array().unwrap().iter().filter(|f| f["cause"].is_null()).collect();
    assert_eq!(seen["findings"].as_u64().unwrap() as usize, shown.len());
    let groups = seen["groups"].as_array().unwrap();
    let mut on_page = BTreeSet::new();
    let mut seen_groups = BTreeSet::new();
    for g in groups {
        assert_eq!(g["open"], false, "detail is collapsed: {g}");
        let key = (g["target"].as_str().unwrap(), g["rule"].as_str().unwrap());
        assert!(seen_groups.insert(key), "one group per target and rule: {key:?}");
        for fp in strings(&g["fingerprints"]) {
            let f = shown.iter().find(|f| f["fingerprint"] == fp).unwrap();
            assert_eq!(f["target"].as_str().unwrap_or(""), key.0, "{fp} is in {key:?}");
            assert_eq!(f["rule"], key.1, "{fp} is in {key:?}");
            assert!(on_page.insert(fp), "{fp} shown twice");
        }
    }
    assert_eq!(on_page.len(), shown.len(), "every finding is in a group");
    // Several findings share a cause on one target (CL001 on V100): grouped, not one row each.
    assert!(groups.len() < shown.len(), "{} groups for {} findings", groups.len(), shown.len());
    // Groups follow the grid: failing targets first.
    let order: Vec<&str> = groups.iter().map(|g| g["target"].as_str().unwrap()).collect();
    let mut first: Vec<&str> = order.clone();
    first.dedup();
    let cols: Vec<&str> = columns(&report).into_iter().filter(|t| first.contains(t)).collect();
    assert_eq!(&first[..cols.len()], &cols[..], "groups in the grid's order: {first:?}");
}
