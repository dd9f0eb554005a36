//! The command line around the scan: the one error style.

use assert_cmd::Command;

use crate::util::root;

/// The variables a CI job sets, unset: a developer's own environment must not decide a test.
const VARIABLES: [&str; 8] = [
    "CUDALINT_FORMAT",
    "CUDALINT_OUTPUT",
    "CUDALINT_CONFIG",
    "CUDALINT_PLATFORM",
    "CUDALINT_PYTHON",
    "CUDALINT_GPU",
    "CUDALINT_DRIVER",
    "CUDALINT_FAIL_ON",
];

fn cudalint() -> Command {
    let mut c = Command::cargo_bin("cudalint").unwrap();
    for v in VARIABLES {
        c.env_remove(v);
    }
    c
}

fn demo() -> String {
    root().join("fixtures/demo/demo-image.tar").display().to_string()
}

#[test]
fn a_usage_error_and_a_runtime_error_share_one_prefix() {
    // Clap refuses the command line.
    let usage = cudalint().args(["scan", "--no-such-flag", &demo()]).output().unwrap();
    // The run fails on a missing file.
    let runtime = cudalint().args(["scan", "/nonexistent/image.tar", "--gpu", "H100", "-q"]).output().unwrap();
    for (what, o) in [("usage", &usage), ("runtime", &runtime)] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(err.starts_with("cudalint: error: "), "{what}: {err}");
        assert_eq!(err.matches("error:").count(), 1, "{what}: {err}");
    }
    let usage = String::from_utf8_lossy(&usage.stderr);
    assert!(usage.contains("'--no-such-flag'") && usage.contains("Usage: cudalint scan"), "{usage}");
    // Help and version are not errors.
    let help = cudalint().args(["scan", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("Check an image"));
}
