//! The HTML report in a real headless Chromium (Debian's `chromium`): every binary and target is
//! in the grid, each cell's computed colour is its verdict class's colour and partial cells are
//! outlined (which also proves the page's own strict CSP admits its style), and a screenshot is
//! written under target/.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cudalint::lint::coverage::Class;
use cudalint::report::html::{colours, css_class};
use serde_json::Value;

use crate::util::{fixture, root};

/// A root filesystem with binaries whose cells on these targets are native, JIT and none.
// libstale.so: one translation unit on a stale list, the partial cell (some modules fail on H100).
const FILES: [&str; 8] = [
    "libmulti.so",
    "libpartial.so",
    "libsm100f.so",
    "libsm90a.so",
    "libdebug.so",
    "libzstd.so",
    "vecadd.ptx",
    "../verdict/libstale.so",
];
const GPUS: &str = "H100,L4,B200";

fn rootfs(dir: &Path) -> PathBuf {
    let lib = dir.join("rootfs/opt/app/lib");
    std::fs::create_dir_all(&lib).unwrap();
    for f in FILES {
        let name = Path::new(f).file_name().unwrap();
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
        .args(["--gpu", GPUS, "--quiet", "--format", "html", "--output"])
        .arg(&html)
        .args(["--format", "json", "--output"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    (html, serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap())
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

/// Loads `page` in an iframe of a probe page (the report itself runs no script) and returns the
/// grid as Chromium rendered it: targets, and each cell's row, target, class and background.
fn rendered(page: &Path) -> Value {
    let probe = page.with_file_name("probe.html");
    let name = page.file_name().unwrap().to_string_lossy();
    std::fs::write(
        &probe,
        format!(
            r#"<!DOCTYPE html><html><body><iframe id="f" src="{name}" width="1400" height="900"></iframe>
<pre id="out">pending</pre><script>
document.getElementById('f').addEventListener('load', () => {{
  const d = document.getElementById('f').contentDocument;
  const cells = [...d.querySelectorAll('#matrix td.cell')].map(td => ({{
    path: td.parentElement.dataset.path, target: td.dataset.target, class: td.dataset.class,
    title: td.title, bg: getComputedStyle(td).backgroundColor,
    outline: getComputedStyle(td).outlineStyle }}));
  const targets = [...d.querySelectorAll('#matrix th[data-target]')].map(th => th.dataset.target);
  const rows = [...d.querySelectorAll('#matrix tbody tr')].map(tr => tr.dataset.path);
  const findings = d.querySelectorAll('#findings tbody tr').length;
  document.getElementById('out').textContent = JSON.stringify({{targets, rows, cells, findings}});
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
    let seen = rendered(&html);
    let targets: Vec<&str> =
        report["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(seen["targets"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect::<Vec<_>>(), targets);
    let rows: Vec<&str> = report["matrix"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), FILES.len(), "every binary with device code has a row: {rows:?}");
    assert_eq!(seen["rows"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect::<Vec<_>>(), rows);
    // Findings whose cause another one says once are folded into it on the page.
    let shown = report["findings"].as_array().unwrap().iter().filter(|f| f["cause"].is_null()).count();
    assert_eq!(seen["findings"].as_u64().unwrap() as usize, shown);

    let mut classes = std::collections::BTreeSet::new();
    let cells = seen["cells"].as_array().unwrap();
    assert_eq!(cells.len(), rows.len() * targets.len());
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
            let partial = c["result"] == "some";
            assert_eq!(
                got["outline"] == "dashed",
                partial,
                "{} on {}: only some modules run",
                row["path"],
                c["target"]
            );
            classes.insert(class.to_string());
            if partial {
                classes.insert("partial".into());
            }
        }
    }
    for want in ["native", "jit", "none", "partial"] {
        assert!(classes.contains(want), "the case should show a {want} cell: {classes:?}");
    }

    // A page whose style no longer matches the hash in its CSP renders without colours: the
    // check above would catch a CSP that blocks the style.
    let tampered = html.with_file_name("tampered.html");
    std::fs::write(&tampered, page.replacen("body{", "body {", 1)).unwrap();
    let t = rendered(&tampered);
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
