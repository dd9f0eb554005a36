use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a tool the test needs and fails, with its output, unless it succeeds; its stdout.
pub fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/bin").join(name)
}

pub fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("fixture {name}: {e} (run scripts/build-fixtures.sh)"))
}

/// Every fixture built by scripts/build-fixtures.sh (not the listings beside them).
pub fn fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("fixtures/bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".txt") && !n.ends_with(".rc"))
        .collect();
    v.sort();
    v
}

/// A Python tool scripts/test.sh pins in its own venv under .tools (`venv`, running `bin`, from
/// PyPI `package`): `env` overrides the path; missing, the test fails saying how to get it.
#[cfg(feature = "slow-tests")]
pub fn venv_tool(env: &str, venv: &str, bin: &str, package: &str) -> PathBuf {
    let p = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".tools").join(venv).join("bin").join(bin));
    assert!(
        p.is_file(),
        "{bin} is not at {} (set {env}): scripts/test.sh installs it, or run \
         `python3 -m venv .tools/{venv} && .tools/{venv}/bin/pip install {package}`",
        p.display()
    );
    p
}
