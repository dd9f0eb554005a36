//! Embeds the built-in rules (every `rules/*.toml`) into the binary.

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=rules");
    let mut files: Vec<_> = std::fs::read_dir("rules")
        .expect("rules/ directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// (file name, contents) of every built-in rule.\npub static BUILTIN_RULES: &[(&str, &str)] = &[\n",
    );
    for f in files {
        let abs = std::fs::canonicalize(&f).expect("rule file");
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        writeln!(out, "    ({name:?}, include_str!({:?})),", abs.display().to_string()).unwrap();
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_rules.rs");
    std::fs::write(dest, out).unwrap();
}
