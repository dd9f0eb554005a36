//! Every `[[test]]` case of every built-in rule as a test of its own, named
//! `CL001::sm90a-only-fails-on-l4` (the rule's code and the case's `name`, which the loader keeps
//! unique within a rule), so one failing case hides none of the others, adding a case renames none
//! of the others, and `cargo test --test rule_cases CL005::` runs one rule's cases.
//!
//! A case expecting `fire` must produce findings of its rule, each with a message and a fix (and
//! the text the case's `message` and `fix` name); their message and fix are kept as an insta
//! snapshot, one file per case in `tests/snapshots/rule_cases/` (a failing case shows its own
//! diff, and cases run in parallel without sharing a file). A case expecting `pass` must produce
//! none, and its rule must have been evaluated at least once (a case whose image gives the rule
//! no binary or target to judge would pass whatever the rule said): there is nothing to snapshot.

use std::sync::Arc;

use cudalint::lint::rules::{self, Rule, RuleTest};
use libtest_mimic::{Arguments, Failed, Trial};

// The `it` test binary's helpers, compiled here too: this target uses only part of them.
#[allow(dead_code)]
#[path = "it/images.rs"]
mod images;
#[allow(dead_code)]
#[path = "common/knowledge_case.rs"]
mod knowledge_case;
#[allow(dead_code)]
#[path = "common/rule_case.rs"]
mod rule_case;
#[allow(dead_code)]
#[path = "it/util.rs"]
mod util;

fn main() {
    let args = Arguments::from_args();
    let rules = Arc::new(rules::load(&[]).expect("built-in rules load"));
    let mut trials = Vec::new();
    for (ri, r) in rules.iter().enumerate() {
        for (ci, case) in r.tests.iter().enumerate() {
            let name = format!("{}::{}", r.code, case.name);
            let rules = Arc::clone(&rules);
            trials.push(Trial::test(name.clone(), move || {
                let r = &rules[ri];
                run_case(&rules, r, &r.tests[ci], &name)
            }));
        }
    }
    // The knowledge base's rows: every case its own test, and every row with at least one.
    let rows = knowledge_case::rows();
    let mut bare = Vec::new();
    for (kind, key, at, cases) in rows {
        if cases.is_empty() {
            bare.push(format!("{kind} {key:?} ({at})"));
        }
        for c in cases {
            let rules = Arc::clone(&rules);
            let at = at.clone();
            trials.push(Trial::test(format!("knowledge::{kind}::{}", c.name), move || {
                knowledge_case::check(&rules, kind, &at, &c).map_err(|e| format!("{at}: {e}").into())
            }));
        }
    }
    trials.push(Trial::test("knowledge::every-row-has-a-case", move || {
        if bare.is_empty() { Ok(()) } else { Err(format!("rows without a case: {bare:#?}").into()) }
    }));
    trials.push(Trial::test("knowledge::every-gpu-has-one-class", || {
        let k = cudalint::knowledge::get();
        let mut wrong = Vec::new();
        for g in cudalint::cuda::gpus::GPUS {
            let n = k.gpu_classes.iter().filter(|c| c.gpus.iter().any(|x| x == g.name)).count();
            if n != 1 {
                wrong.push(format!("{} is in {n} classes", g.name));
            }
        }
        if wrong.is_empty() { Ok(()) } else { Err(format!("{wrong:#?}").into()) }
    }));
    libtest_mimic::run(&args, trials).exit();
}

/// The case's image judged with every rule (as a real run would), then the rule's findings.
fn run_case(rules: &[Rule], r: &Rule, case: &RuleTest, name: &str) -> Result<(), Failed> {
    let report = rule_case::lint(rules, case);
    let fired: Vec<_> = report.findings.iter().filter(|f| f.rule == r.code).collect();
    let about = format!("{name} ({}): {case:?}", r.source);
    match case.expect.as_str() {
        "pass" if report.evaluated.get(&r.code).copied().unwrap_or(0) == 0 => {
            return Err(format!("{about}\nthe rule was never evaluated: a pass proves nothing").into());
        }
        "pass" if fired.is_empty() => return Ok(()),
        "pass" => return Err(format!("{about}\nfired, and must not:\n{fired:#?}").into()),
        "fire" if fired.is_empty() => {
            return Err(format!("{about}\ndid not fire; all findings:\n{:#?}", report.findings).into());
        }
        "fire" => {}
        other => return Err(format!("{about}\nexpect is {other:?}: fire or pass").into()),
    }
    for f in &fired {
        if f.message.is_empty() || f.fix.is_empty() {
            return Err(format!("{about}\nevery finding carries a message and a fix: {f:#?}").into());
        }
        if let Some(m) = case.message.as_deref().filter(|m| !f.message.contains(m)) {
            return Err(format!("{about}\nmessage {:?} lacks {m:?}", f.message).into());
        }
        if let Some(m) = case.fix.as_deref().filter(|m| !f.fix.contains(m)) {
            return Err(format!("{about}\nfix {:?} lacks {m:?}", f.fix).into());
        }
    }
    let mut text = String::new();
    for f in &fired {
        let mut at = [f.path.as_deref(), f.target.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" on ");
        if at.is_empty() {
            at = "image".into();
        }
        text.push_str(&format!("at: {at}\nmessage: {}\nfix: {}\n\n", f.message, f.fix));
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots/rule_cases");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_description(format!("{name} ({})", r.source));
    settings.set_omit_expression(true);
    // The file name: `CL001::sm90a-only-fails-on-l4` -> `CL001-sm90a-only-fails-on-l4.snap`.
    settings.bind(|| insta::assert_snapshot!(name.replace("::", "-"), text.trim_end()));
    Ok(())
}
