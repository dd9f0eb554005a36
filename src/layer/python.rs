//! What a Python package's own `.py` files import, read as the layers stream past and never run:
//! for each import statement of a module of the same top-level package, the module it names, its
//! line, and whether it runs when its file does (module level) or only later (inside a function,
//! or behind `try: … except ImportError`). `lint::imports` decides from this which extension
//! modules a package loads at import time and which only on demand.
//!
//! A small tokenizer rather than a Python parser (ruff's and RustPython's parsers are each more
//! code than cudalint's inspectors, and would add minutes to a 2-core build): it needs only
//! strings, comments, brackets, line continuations and indentation, and what it cannot read
//! (too large, not UTF-8) is recorded as unread, which the judgement takes as "imports
//! everything at import time" (fail closed).

use serde::{Deserialize, Serialize};

/// A `.py` file larger than this is not read (the largest of torch 2.8's 2,000 is ~700 KiB).
pub const MAX_FILE: u64 = 2 << 20;

/// What one layer's `.py` records may keep, in bytes (paths, module names and imports, each
/// counted with [`ENTRY`]); the files past it are recorded unread. A layer holding torch keeps
/// about 2 MiB.
pub const MAX_KEPT: usize = 32 << 20;

/// What a record or an import costs beyond its bytes.
const ENTRY: usize = 48;

/// A longer imported name makes its file unread: real ones are a few dozen bytes, and each is
/// kept once per name imported from it and walked by its dots.
const MAX_NAME: usize = 1024;

/// A `.py` file of a package: `…/site-packages/pkg/sub/mod.py`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyFile {
    /// The file's absolute path.
    pub path: String,
    /// Its dotted module name (`pkg.sub.mod`; `pkg.sub` for `pkg/sub/__init__.py`).
    pub module: String,
    /// The imports of modules of its own top-level package, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<PyImport>,
    /// Why the imports are not known (too large, not UTF-8, the layer's bound), when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
    /// A top-level package's `version.py`: its module-level string constants `__version__` and
    /// `cuda` (torch's `torch.version.cuda`, which version-selecting loaders read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<(String, String)>,
    /// What shows it compiles device code at run time: an import of a module that does (the
    /// compiler table's `[[python_compiler]]` rows), or a string naming a compiler to run or
    /// libNVVM to load; the first of each kind, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compiles: Vec<PyCompile>,
}

/// One piece of evidence that a file compiles device code at run time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyCompile {
    /// nvrtc, nvjitlink, nvcc, ptxas, nvptxcompiler, nvvm.
    pub kind: String,
    /// `imports cuda.bindings.nvrtc`, `names nvcc`, `names libnvrtc.so.12`.
    pub what: String,
    pub line: u32,
}

/// One imported module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyImport {
    /// Absolute dotted name. `from a import b` gives `a` and `a.b` (b may be a submodule).
    pub module: String,
    pub line: u32,
    pub how: How,
}

crate::schema::words! {
    /// When an import statement runs, relative to its file's own import.
    pub enum How {
        /// At module level: when the file is imported.
        Module = "module",
        /// Inside a function: when it is called.
        Function = "function",
        /// Inside `try:` whose handlers catch ImportError (or ModuleNotFoundError, Exception,
        /// BaseException, or everything): the file imports whether or not it does.
        Guarded = "guarded",
    }
}

/// The directory of installed packages a path is under (`/usr/lib/python3/dist-packages`) and
/// the module the path names there (`pkg/sub/mod.py` -> `pkg.sub.mod`), for files inside a
/// package directory (a top-level `six.py` is no package). Every component must be a Python
/// identifier. `suffix_ok` tells whether the file name (its part after the first `.`) is a
/// module's: `py`, or an extension module's tag.
pub fn module_of(path: &str, suffix_ok: impl Fn(&str) -> bool) -> Option<(&str, String)> {
    let at =
        ["/site-packages/", "/dist-packages/"].iter().filter_map(|m| path.rfind(m).map(|i| i + m.len() - 1)).max()?;
    let (site, rest) = (&path[..at], &path[at + 1..]);
    let (dirs, name) = rest.rsplit_once('/')?;
    let (stem, suffix) = name.split_once('.')?;
    if !suffix_ok(suffix) {
        return None;
    }
    let mut parts: Vec<&str> = dirs.split('/').collect();
    if stem != "__init__" {
        parts.push(stem);
    }
    parts.iter().all(|p| identifier(p)).then(|| (site, parts.join(".")))
}

/// [`module_of`], where a path under no site directory may also be one relative to the root (a
/// wheel scanned as itself: its members are named `/pkg/mod.py`, the site directory `""`).
pub fn module_at(path: &str, root_is_site: bool, suffix_ok: impl Fn(&str) -> bool) -> Option<(&str, String)> {
    if let Some(m) = module_of(path, &suffix_ok) {
        return Some(m);
    }
    if !root_is_site || !path.starts_with('/') {
        return None;
    }
    let rest = &path[1..];
    let (dirs, name) = rest.rsplit_once('/')?;
    let (stem, suffix) = name.split_once('.')?;
    if !suffix_ok(suffix) {
        return None;
    }
    let mut parts: Vec<&str> = dirs.split('/').collect();
    if stem != "__init__" {
        parts.push(stem);
    }
    parts.iter().all(|p| identifier(p)).then(|| ("", parts.join(".")))
}

fn identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_') && c.all(|x| x.is_alphanumeric() || x == '_')
}

/// A `.py` file of a package, by path: read, whatever its size ([`read`] bounds it).
pub fn wanted(path: &str, root_is_site: bool) -> bool {
    path.ends_with(".py") && module_at(path, root_is_site, |s| s == "py").is_some()
}

/// The record of `path` with `bytes` (or unread, with `why`).
pub fn unread(path: &str, root_is_site: bool, why: String) -> Option<PyFile> {
    let (_, module) = module_at(path, root_is_site, |s| s == "py")?;
    Some(PyFile {
        path: path.to_string(),
        module,
        imports: Vec::new(),
        unread: Some(why),
        constants: Vec::new(),
        compiles: Vec::new(),
    })
}

/// Whether a record says anything the judgement reads: imports, constants, that it could not be
/// read, or that its package exists (`__init__.py`).
pub fn worth_keeping(f: &PyFile) -> bool {
    !f.imports.is_empty()
        || !f.constants.is_empty()
        || !f.compiles.is_empty()
        || f.unread.is_some()
        || f.path.ends_with("/__init__.py")
}

/// What a record costs against [`MAX_KEPT`].
pub fn cost(f: &PyFile) -> usize {
    ENTRY
        + f.path.len()
        + f.module.len()
        + f.imports.iter().map(|i| ENTRY + i.module.len()).sum::<usize>()
        + f.constants.iter().map(|(k, v)| ENTRY + k.len() + v.len()).sum::<usize>()
        + f.compiles.iter().map(|c| ENTRY + c.kind.len() + c.what.len()).sum::<usize>()
}

/// Reads a package's `.py` file.
pub fn read(path: &str, root_is_site: bool, bytes: &[u8]) -> Option<PyFile> {
    let (_, module) = module_at(path, root_is_site, |s| s == "py")?;
    let Ok(text) = std::str::from_utf8(bytes) else {
        return unread(path, root_is_site, "not UTF-8".into());
    };
    let package = if path.ends_with("/__init__.py") {
        module.clone()
    } else {
        module.rsplit_once('.').map(|(p, _)| p.to_string()).unwrap_or_default()
    };
    let top = module.split('.').next().unwrap_or_default().to_string();
    let version_py = module == format!("{top}.version");
    let lines = logical_lines(text.strip_prefix('\u{feff}').unwrap_or(text));
    match scan(&lines, &package, &top, version_py) {
        Ok((imports, constants)) => {
            let compiles = compiles(&lines);
            Some(PyFile { path: path.to_string(), module, imports, unread: None, constants, compiles })
        }
        Err(why) => unread(path, root_is_site, why),
    }
}

/// What of a file's code shows it compiles device code at run time (the first of each kind):
/// an import of a module the compiler table names, or a string literal naming a compiler it
/// runs (`"nvcc"`, `".../bin/ptxas"`) or libNVVM (`"libnvvm.so"`). Only whole strings count: a
/// compiler named inside a sentence is not run.
fn compiles(lines: &[Logical]) -> Vec<PyCompile> {
    let table = crate::cuda::toolchains::table();
    let mut out: Vec<PyCompile> = Vec::new();
    let mut add = |kind: &str, what: String, line: u32| {
        if !out.iter().any(|c| c.kind == kind) {
            out.push(PyCompile { kind: kind.to_string(), what, line });
        }
    };
    for l in lines {
        // Most lines import nothing: split only those that may.
        let code = l.code.trim_start();
        let may_import = code.starts_with("import ") || code.starts_with("from ") || code.contains(';');
        let stmts = if may_import { split_top(&l.code, ';') } else { Vec::new() };
        for stmt in stmts {
            for module in modules_named(stmt) {
                if let Some(row) = table.python_compiler(&module) {
                    add(&row.kind, format!("imports {module}"), l.line);
                }
            }
        }
        for s in &l.strings {
            let base = s.rsplit('/').next().unwrap_or(s);
            // A library name alone is not a compile: packages list libnvrtc among the CUDA
            // libraries they preload for others (ONNX Runtime's `preload_dlls`); NVVM is only
            // ever loaded to compile.
            let kind = match base {
                "nvcc" | "ptxas" if !s.contains(char::is_whitespace) => base,
                _ if base.starts_with("libnvvm.so") => "nvvm",
                _ => continue,
            };
            add(kind, format!("names {}", base.chars().take(48).collect::<String>()), l.line);
        }
    }
    out
}

/// Every absolute module an import statement names (`import a.b as c, d` -> a.b, d;
/// `from a.b import c` -> a.b, a.b.c); relative imports name the file's own package, never a
/// compiler's.
fn modules_named(stmt: &str) -> Vec<String> {
    let s = stmt.trim();
    let word = |p: &str| p.split_whitespace().next().unwrap_or("").to_string();
    if let Some(names) = s.strip_prefix("import ") {
        names.split(',').map(word).filter(|m| !m.is_empty()).collect()
    } else if let Some((base, names)) = s.strip_prefix("from ").and_then(|r| r.split_once(" import")) {
        let base = base.trim();
        if base.is_empty() || base.starts_with('.') {
            return Vec::new();
        }
        let mut out = vec![base.to_string()];
        let names = names.trim().trim_start_matches('(').trim_end_matches(')');
        out.extend(names.split(',').map(word).filter(|n| !n.is_empty() && n != "*").map(|n| format!("{base}.{n}")));
        out
    } else {
        Vec::new()
    }
}

/// A logical line: where it starts, its indentation, its code with every string literal
/// replaced by `""` and comments removed, and the string literals' contents.
struct Logical {
    line: u32,
    indent: usize,
    code: String,
    strings: Vec<String>,
}

/// Splits source into logical lines (brackets and backslashes join physical lines). Works on
/// bytes: every byte it looks for is ASCII, which no UTF-8 sequence contains, so the text it
/// copies stays whole.
fn logical_lines(text: &str) -> Vec<Logical> {
    struct Open {
        line: u32,
        indent: usize,
        code: Vec<u8>,
        strings: Vec<String>,
    }
    let close = |o: Open| Logical {
        line: o.line,
        indent: o.indent,
        code: String::from_utf8_lossy(&o.code).into_owned(),
        strings: o.strings,
    };
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut i, mut line) = (0usize, 1u32);
    let mut cur: Option<Open> = None;
    let mut depth = 0usize;
    let mut at_start = true;
    while i < b.len() {
        if at_start {
            // Indentation of a new logical line.
            let mut indent = 0;
            while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\x0c') {
                indent = if b[i] == b'\t' { (indent / 8 + 1) * 8 } else { indent + 1 };
                i += 1;
            }
            cur = Some(Open { line, indent, code: Vec::new(), strings: Vec::new() });
            at_start = false;
            continue;
        }
        let l = cur.as_mut().expect("a logical line is open");
        let c = b[i];
        match c {
            b'#' => {
                i += b[i..].iter().position(|&x| x == b'\n').unwrap_or(b.len() - i);
            }
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                l.code.push(b' ');
                line += 1;
                i += 2;
            }
            b'\n' => {
                line += 1;
                i += 1;
                if depth == 0 {
                    let done = cur.take().expect("open");
                    if !done.code.iter().all(u8::is_ascii_whitespace) {
                        out.push(close(done));
                    }
                    at_start = true;
                } else {
                    l.code.push(b' ');
                }
            }
            b'"' | b'\'' => {
                let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
                i += if triple { 3 } else { 1 };
                let from = i;
                let mut to = b.len();
                while i < b.len() {
                    let d = b[i];
                    if d == b'\\' && i + 1 < b.len() {
                        if b[i + 1] == b'\n' {
                            line += 1;
                        }
                        i += 2;
                        continue;
                    }
                    if d == c && (!triple || (b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c))) {
                        to = i;
                        i += if triple { 3 } else { 1 };
                        break;
                    }
                    if d == b'\n' {
                        if !triple {
                            // An unterminated string ends at its line (its newline ends the
                            // logical line), as Python's tokenizer refuses it.
                            to = i;
                            break;
                        }
                        line += 1;
                    }
                    i += 1;
                }
                l.code.extend_from_slice(b"\"\"");
                l.strings.push(String::from_utf8_lossy(&b[from..to.min(b.len())]).into_owned());
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                l.code.push(c);
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                l.code.push(c);
                i += 1;
            }
            _ => {
                l.code.push(c);
                i += 1;
            }
        }
    }
    if let Some(done) = cur.filter(|d| !d.code.iter().all(u8::is_ascii_whitespace)) {
        out.push(close(done));
    }
    out
}

/// `code` split at `sep` outside brackets (strings are already blanked).
fn split_top(code: &str, sep: char) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0usize, 0usize);
    for (i, c) in code.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ if c == sep && depth == 0 => {
                out.push(&code[from..i]);
                from = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&code[from..]);
    out
}

/// The first `:` outside brackets that ends a compound statement's header, and `lambda`'s are
/// rare enough there to be left aside.
fn header_colon(code: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in code.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            // `:=` is an assignment expression, not the end of a header.
            ':' if depth == 0 && !code[i + 1..].starts_with('=') => return Some(i),
            _ => {}
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Block {
    Def,
    /// `try:`'s body; the index of the try.
    Try(usize),
    /// `if TYPE_CHECKING:`: never runs.
    TypeChecking,
    Other,
}

/// The first word of a statement (`async def` counts as `def`).
fn keyword(stmt: &str) -> &str {
    let s = stmt.trim_start();
    let s = s.strip_prefix("async ").map(str::trim_start).unwrap_or(s);
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// A handler that catches a failed import.
fn catches_import_error(header: &str) -> bool {
    let what = header.trim_start().strip_prefix("except").unwrap_or("").trim_start_matches('*');
    let what = what.split(" as ").next().unwrap_or("");
    what.trim().is_empty()
        || what
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map(|w| w.rsplit('.').next().unwrap_or(w))
            .any(|w| matches!(w, "ImportError" | "ModuleNotFoundError" | "Exception" | "BaseException"))
}

type Scanned = (Vec<PyImport>, Vec<(String, String)>);

/// The imports and constants of a file, or why they are not kept: a name over [`MAX_NAME`]
/// bytes, or more than [`MAX_KEPT`] of them (`from a.long.name import x, y, …` keeps the base
/// once per name, so a file's bytes do not bound them).
fn scan(lines: &[Logical], package: &str, top: &str, version_py: bool) -> Result<Scanned, String> {
    let mut imports = Vec::new();
    let mut constants = Vec::new();
    let mut stack: Vec<(usize, Block)> = Vec::new();
    // Each try: whether a handler of it catches ImportError; the last try at each indentation.
    let mut tries: Vec<bool> = Vec::new();
    let mut last_try: std::collections::HashMap<usize, usize> = Default::default();
    // Imports inside a try, settled once its handlers are known: (index in `imports`, index in
    // `enclosing`), the tries around each logical line kept once for all its imports (a line
    // with many of them inside many one-line `try:` costs its length, not their product).
    let mut pending: Vec<(usize, usize)> = Vec::new();
    let mut enclosing: Vec<Vec<usize>> = Vec::new();
    let mut kept = 0usize;
    for l in lines {
        let mut indent = l.indent;
        let mut rest: &str = &l.code;
        // A compound header may carry its body on the same line (`try: import x`).
        loop {
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            let kw = keyword(rest);
            let compound = matches!(
                kw,
                "def" | "class" | "if" | "elif" | "else" | "try" | "except" | "finally" | "with" | "for" | "while"
            );
            let Some(colon) = header_colon(rest).filter(|_| compound) else { break };
            let header = &rest[..colon];
            let block = match kw {
                "def" => Block::Def,
                "try" => {
                    tries.push(false);
                    last_try.insert(indent, tries.len() - 1);
                    Block::Try(tries.len() - 1)
                }
                "except" => {
                    if let Some(&t) = last_try.get(&indent)
                        && catches_import_error(header)
                    {
                        tries[t] = true;
                    }
                    Block::Other
                }
                "if" => {
                    let cond = header.trim_start().strip_prefix("if").unwrap_or("").trim();
                    if cond == "TYPE_CHECKING" || cond.ends_with(".TYPE_CHECKING") {
                        Block::TypeChecking
                    } else {
                        Block::Other
                    }
                }
                _ => Block::Other,
            };
            stack.push((indent, block));
            rest = &rest[colon + 1..];
            if rest.trim().is_empty() {
                break;
            }
            indent += 1;
        }
        if rest.trim().is_empty() || stack.iter().any(|(_, b)| *b == Block::TypeChecking) {
            continue;
        }
        let in_def = stack.iter().any(|(_, b)| *b == Block::Def);
        let in_try: Vec<usize> =
            stack.iter().filter_map(|(_, b)| if let Block::Try(t) = b { Some(*t) } else { None }).collect();
        let guarded = !in_def && !in_try.is_empty();
        if guarded {
            enclosing.push(in_try);
        }
        for stmt in split_top(rest, ';') {
            let first = imports.len();
            // Each name checked as it is made: a statement's names are not bounded by its bytes.
            imported(stmt, package, top, &mut |module: String| {
                if module.len() > MAX_NAME {
                    return Err(format!("an imported name of over {MAX_NAME} bytes (line {})", l.line));
                }
                kept += ENTRY + module.len();
                if kept > MAX_KEPT {
                    return Err(format!("its imports take over {} MiB", MAX_KEPT >> 20));
                }
                let how = if in_def { How::Function } else { How::Module };
                imports.push(PyImport { module, line: l.line, how });
                Ok(())
            })?;
            if guarded {
                pending.extend((first..imports.len()).map(|i| (i, enclosing.len() - 1)));
            }
            if version_py && stack.is_empty() && l.strings.len() == 1 {
                let (lhs, rhs) = stmt.split_once('=').unwrap_or(("", ""));
                let name = lhs.split(':').next().unwrap_or("").trim();
                if matches!(name, "__version__" | "cuda") && rhs.trim() == "\"\"" {
                    constants.push((name.to_string(), l.strings[0].chars().take(64).collect()));
                }
            }
        }
    }
    // Each line's tries looked at once, not once per import on it.
    let caught: Vec<bool> = enclosing.iter().map(|ts| ts.iter().any(|&t| tries[t])).collect();
    for (i, e) in pending {
        if caught[e] {
            imports[i].how = How::Guarded;
        }
    }
    Ok((imports, constants))
}

/// The modules of `top` an import statement names, absolute.
fn imported(
    stmt: &str,
    package: &str,
    top: &str,
    out: &mut dyn FnMut(String) -> Result<(), String>,
) -> Result<(), String> {
    let s = stmt.trim();
    let own = |m: &str| m == top || m.starts_with(&format!("{top}."));
    if let Some(names) = s.strip_prefix("import ").or_else(|| s.strip_prefix("import\t")) {
        for part in names.split(',') {
            let m: String = part.split_whitespace().next().unwrap_or("").to_string();
            if !m.is_empty() && own(&m) {
                out(m)?;
            }
        }
    } else if let Some(rest) = s.strip_prefix("from ").or_else(|| s.strip_prefix("from\t")) {
        let Some((base, names)) = rest.split_once(" import") else { return Ok(()) };
        let base = base.trim();
        let dots = base.chars().take_while(|c| *c == '.').count();
        let base = if dots == 0 {
            base.to_string()
        } else {
            let mut parts: Vec<&str> = package.split('.').filter(|p| !p.is_empty()).collect();
            if dots - 1 > parts.len() || parts.is_empty() {
                return Ok(());
            }
            parts.truncate(parts.len() - (dots - 1));
            let rel = &base[dots..];
            if !rel.is_empty() {
                parts.push(rel);
            }
            parts.join(".")
        };
        if !own(&base) {
            return Ok(());
        }
        out(base.clone())?;
        let names = names.trim().trim_start_matches('(').trim_end_matches(')');
        for part in names.split(',') {
            let n = part.split_whitespace().next().unwrap_or("");
            if identifier(n) {
                out(format!("{base}.{n}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imports(path: &str, src: &str) -> Vec<(String, u32, How)> {
        read(path, false, src.as_bytes()).unwrap().imports.into_iter().map(|i| (i.module, i.line, i.how)).collect()
    }

    const P: &str = "/usr/lib/python3.11/site-packages";

    #[test]
    fn module_names_come_from_the_path_under_site_packages() {
        let m = |p: &str| module_of(p, |s| s == "py").map(|(s, m)| (s.to_string(), m));
        assert_eq!(m(&format!("{P}/pkg/__init__.py")), Some((P.to_string(), "pkg".into())));
        assert_eq!(m("/x/dist-packages/pkg/sub/mod.py").map(|x| x.1).as_deref(), Some("pkg.sub.mod"));
        assert_eq!(m(&format!("{P}/six.py")), None, "a top-level module is no package");
        assert_eq!(m(&format!("{P}/pkg-1.0.dist-info/x.py")), None, "not an identifier");
        assert_eq!(m("/opt/app/pkg/x.py"), None, "not installed");
    }

    #[test]
    fn each_import_form_names_absolute_modules_of_its_own_package() {
        let src = "import os, pkg.a as a\nfrom . import b, c as d\nfrom .e import f\nfrom ..up import g\n\
                   from pkg.h import (\n    i,\n    j as k,\n)\nfrom numpy import z\nimport pkg\n";
        let got: Vec<(String, u32)> =
            imports(&format!("{P}/pkg/sub/m.py"), src).into_iter().map(|(m, l, _)| (m, l)).collect();
        let want = [
            ("pkg.a", 1),
            ("pkg.sub", 2),
            ("pkg.sub.b", 2),
            ("pkg.sub.c", 2),
            ("pkg.sub.e", 3),
            ("pkg.sub.e.f", 3),
            ("pkg.up", 4),
            ("pkg.up.g", 4),
            ("pkg.h", 5),
            ("pkg.h.i", 5),
            ("pkg.h.j", 5),
            ("pkg", 10),
        ];
        assert_eq!(got, want.map(|(m, l)| (m.to_string(), l)));
        // In `__init__.py` the package is the module itself.
        let got = imports(&format!("{P}/pkg/__init__.py"), "from ._C import x\n");
        assert_eq!(got[0].0, "pkg._C");
    }

    #[test]
    fn functions_try_blocks_and_type_checking_are_told_apart() {
        let src = r#"
"""Docstring: import pkg.fake
"""
import pkg.top
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pkg import typed
else:
    from pkg import untyped
try:
    from pkg import _fa3  # optional
    HAS = True
except (ImportError, OSError):
    HAS = False
try:
    import pkg.strict
except KeyError:
    pass
def load():
    from pkg._ext import run
    return run
class C:
    import pkg.classbody
    async def m(self):
        import pkg.method
if True: import pkg.oneline
try: import pkg.inline
except: pass
x = "import pkg.string"; import pkg.after
"#;
        let got: Vec<(String, How)> =
            imports(&format!("{P}/pkg/m.py"), src).into_iter().map(|(m, _, h)| (m, h)).collect();
        let want = [
            ("pkg.top", How::Module),
            ("pkg", How::Module),
            ("pkg.untyped", How::Module),
            ("pkg", How::Guarded),
            ("pkg._fa3", How::Guarded),
            ("pkg.strict", How::Module),
            ("pkg._ext", How::Function),
            ("pkg._ext.run", How::Function),
            ("pkg.classbody", How::Module),
            ("pkg.method", How::Function),
            ("pkg.oneline", How::Module),
            ("pkg.inline", How::Guarded),
            ("pkg.after", How::Module),
        ];
        assert_eq!(got, want.map(|(m, h)| (m.to_string(), h)));
    }

    #[test]
    fn lines_are_counted_through_strings_and_continuations() {
        let src = "x = '''a\nb'''\ny = 1 + \\\n  2\ndef f():\n    import pkg.late\n";
        assert_eq!(imports(&format!("{P}/pkg/m.py"), src), [("pkg.late".to_string(), 6, How::Function)]);
        // An unterminated string ends at its line; text after multi-byte characters is read.
        let src = "x = 'caf\u{e9}\nimport pkg.next  # \u{2713}\ns = \"\u{e9}\"; import pkg.after\n";
        let got: Vec<(String, u32)> =
            imports(&format!("{P}/pkg/m.py"), src).into_iter().map(|(m, l, _)| (m, l)).collect();
        assert_eq!(got, [("pkg.next".to_string(), 2), ("pkg.after".to_string(), 3)]);
    }

    /// A short file cannot make many long names: `from <1 MiB name> import x, x, …` is unread.
    #[test]
    fn names_that_would_multiply_a_files_bytes_make_it_unread() {
        let long = format!("from pkg.{} import {}\n", "a".repeat(2000), "x, ".repeat(10));
        let f = read(&format!("{P}/pkg/m.py"), false, long.as_bytes()).unwrap();
        assert!(f.unread.as_deref().is_some_and(|w| w.contains("over 1024 bytes")), "{:?}", f.unread);
        let many = format!("from pkg.{} import {}\n", "a".repeat(1000), "x, ".repeat(40_000));
        let f = read(&format!("{P}/pkg/m.py"), false, many.as_bytes()).unwrap();
        assert!(f.unread.as_deref().is_some_and(|w| w.contains("MiB")), "{:?}", f.unread);
        // Deep one-line `try:` nesting with many imports stays linear (this would take
        // gigabytes if each import copied its enclosing tries).
        let deep = format!("{}{}\n", "try: ".repeat(20_000), "import pkg.a; ".repeat(20_000));
        let f = read(&format!("{P}/pkg/m.py"), false, deep.as_bytes()).unwrap();
        assert_eq!(f.imports.len(), 20_000);
    }

    #[test]
    fn what_cannot_be_read_is_unread_and_version_py_keeps_its_constants() {
        let f = read(&format!("{P}/pkg/m.py"), false, b"import pkg.a\n\xff\n").unwrap();
        assert_eq!(f.unread.as_deref(), Some("not UTF-8"));
        let v = read(
            &format!("{P}/torch/version.py"),
            false,
            b"from typing import Optional\n__version__ = '2.8.0+cu128'\ncuda: Optional[str] = '12.8'\nhip = None\n",
        )
        .unwrap();
        assert_eq!(v.constants, [("__version__".into(), "2.8.0+cu128".into()), ("cuda".into(), "12.8".into())]);
        // Only a top-level package's version.py.
        let o = read(&format!("{P}/torch/sub/version.py"), false, b"cuda = '12.8'\n").unwrap();
        assert!(o.constants.is_empty());
    }
}
