use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
