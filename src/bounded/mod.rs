//! Untrusted YAML and JSON (manifests, node lists) read within bounds, as `audit` and
//! `--targets-from` read them:
//!
//! Reading the audit's YAML and JSON inputs within bounds a hostile file cannot stretch
//! (docs/trust.md): what is held is only what the audit reads, and both that and the work of
//! reading are counted as they grow, so an alias bomb, a file of values or a deep nesting is
//! refused early with its reason, never expanded.
//!
//! - What is kept of each Kubernetes object: `apiVersion`, `kind`, `spec`, `template`, `items`
//!   (each an object again), `metadata` `name`, `generateName`, `namespace` and `labels`,
//!   `status` `capacity` and `allocatable`, and other top-level scalars (a bare label map);
//!   the rest (managed fields, annotations, a node's image list, ...) is read past unkept.
//! - Held values are costed as they are made (a node, plus the bytes of a string) against
//!   [`MAX_HELD_JSON`] or [`MAX_HELD_YAML`]; every value read, kept or not and each alias expansion again, against a work
//!   bound in proportion to the input, so aliases can expand a document at most a little.
//! - YAML: at most [`MAX_YAML`] bytes, [`MAX_YAML_DOCUMENT`] in one document (the parser holds
//!   a document's events, many times its text), flow collections nested at most [`MAX_FLOW_DEPTH`] deep (libyaml's scanner is
//!   quadratic in that depth), merge keys (`<<`) applied as Kubernetes' YAML reader applies
//!   them. Any input: a key given twice in a map that is kept is refused (readers disagree on
//!   which one counts).
//!
//! [`json_spans`]: the span scanner `--enrich` edits another tool's SBOM with, within bounds of
//! its own.

/// Largest manifest or nodes file read (a `kubectl get all -A -o json` of a big cluster is tens
/// of MiB; beyond this the input is refused rather than held in memory). YAML has a lower bound
/// ([`MAX_YAML`]).
pub const MAX_INPUT: u64 = 64 << 20;

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

pub mod json_spans;

/// The most the kept values of one input may take in memory, as costed below: JSON, read
/// as it streams by; YAML, whose documents' events are held besides.
pub const MAX_HELD_JSON: u64 = 128 << 20;
pub const MAX_HELD_YAML: u64 = 64 << 20;
/// What a `serde_json::Value` takes in its container (a map entry's, a vector's slot).
const NODE_COST: u64 = 48;
/// A map besides: one B-tree leaf, whatever its few entries.
const MAP_COST: u64 = NODE_COST + 560;
/// A vector besides (its growth).
const SEQ_COST: u64 = NODE_COST + 32;
/// A string's (or a key's) allocation besides its bytes.
const STRING_COST: u64 = 32;
/// The most one YAML document may be: libyaml's events for it are held at once, up to 70
/// times the text (`[a,a,a,...]`). No Kubernetes object is larger (etcd stores at most
/// 1.5 MiB of one); a `List` of many is, and is welcome as JSON.
pub const MAX_YAML_DOCUMENT: usize = 1 << 20;
/// The most YAML one input may be.
pub const MAX_YAML: usize = 32 << 20;
/// Nesting of YAML flow collections (`[`, `{`) allowed; the deserializer stops at 128
/// anyway.
pub const MAX_FLOW_DEPTH: usize = 256;
/// Work (values read, each string's bytes besides) allowed beyond twice the input's size:
/// room for aliases and merge keys, not for a bomb.
const SLACK: u64 = 4 << 20;

/// Which part of a document a value is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    /// A document: an object, or an array of objects.
    Top,
    /// A Kubernetes object (or a List of them).
    Object,
    /// A List's `items`: objects.
    Items,
    Metadata,
    Status,
    /// A workload's, a pod's or a node's `spec`.
    Spec,
    /// A pod template (`template`, `jobTemplate`).
    Template,
    /// `containers`, `initContainers`, and each of them.
    Containers,
    /// Kept whole.
    Any,
}

struct Budget {
    held: Cell<u64>,
    work: Cell<u64>,
    max_held: u64,
    max_work: u64,
    yaml: bool,
    /// Why reading stopped, when a bound did: said instead of the parser's wrapping.
    refused: RefCell<Option<String>>,
}

impl Budget {
    fn charge<E: de::Error>(&self, held: u64, work: u64) -> Result<(), E> {
        self.work.set(self.work.get() + work);
        self.held.set(self.held.get() + held);
        if self.work.get() > self.max_work {
            return Err(self.refuse(if self.yaml {
                "aliases or merge keys expand to far more than the document holds (a YAML alias bomb?): refused".into()
            } else {
                "more values than the input holds: refused".into()
            }));
        }
        if self.held.get() > self.max_held {
            return Err(self.refuse(format!(
                "the parts the audit reads take more than {} MiB in memory: refused (split the input)",
                self.max_held >> 20
            )));
        }
        Ok(())
    }

    fn refuse<E: de::Error>(&self, why: String) -> E {
        let e = E::custom(&why);
        self.refused.borrow_mut().get_or_insert(why);
        e
    }
}

/// The documents of `text` (JSON when it starts with `{` or `[`, else a YAML stream), each
/// kept as `shape` says; empty YAML documents dropped, a top-level JSON array spread into
/// its items. Errors are the reason, without the file's name.
pub fn documents(text: &str, shape: Shape) -> Result<Vec<Value>, String> {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    let json = t.starts_with('{') || t.starts_with('[');
    let budget = Budget {
        held: Cell::new(0),
        work: Cell::new(0),
        max_held: if json { MAX_HELD_JSON } else { MAX_HELD_YAML },
        max_work: 2 * text.len() as u64 + SLACK,
        yaml: !json,
        refused: RefCell::new(None),
    };
    let why = |e: String| budget.refused.borrow().clone().unwrap_or(e);
    if json {
        let v = json_value(t, shape, &budget).map_err(why)?;
        return Ok(match v {
            Value::Array(a) if shape == Shape::Top => a,
            v => vec![v],
        });
    }
    yaml_sizes(text)?;
    flow_depth(text)?;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let v = Keep { b: &budget, shape }
            .deserialize(doc)
            .map_err(|e| format!("document {}: {}", i + 1, why(e.to_string())))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// One JSON value (a document, not spread), kept as `shape` says, within the bounds.
pub fn json(text: &str, shape: Shape) -> Result<Value, String> {
    let budget = Budget {
        held: Cell::new(0),
        work: Cell::new(0),
        max_held: MAX_HELD_JSON,
        max_work: 2 * text.len() as u64 + SLACK,
        yaml: false,
        refused: RefCell::new(None),
    };
    json_value(text, shape, &budget).map_err(|e| budget.refused.borrow().clone().unwrap_or(e))
}

fn json_value(text: &str, shape: Shape, budget: &Budget) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Keep { b: budget, shape }.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// Builds the kept part of a value as a `serde_json::Value`.
struct Keep<'b> {
    b: &'b Budget,
    shape: Shape,
}

impl<'de> DeserializeSeed<'de> for Keep<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// What a key of a map of `shape` holds: None, read past. This is every field the audit
/// reads (`audit::cluster`, `manifest::workloads`, `manifest::gpu_containers`, `lint::targets`).
fn child(shape: Shape, key: &str) -> Option<Shape> {
    match shape {
        Shape::Top | Shape::Object | Shape::Items => match key {
            "apiVersion" | "kind" => Some(Shape::Any),
            "metadata" => Some(Shape::Metadata),
            "spec" => Some(Shape::Spec),
            "template" => Some(Shape::Template),
            "status" => Some(Shape::Status),
            "items" => Some(Shape::Items),
            _ => None,
        },
        Shape::Metadata => matches!(key, "name" | "generateName" | "namespace" | "labels").then_some(Shape::Any),
        Shape::Status => matches!(key, "capacity" | "allocatable").then_some(Shape::Any),
        Shape::Spec => match key {
            "nodeName" | "nodeSelector" | "affinity" | "tolerations" | "taints" => Some(Shape::Any),
            "containers" | "initContainers" => Some(Shape::Containers),
            "template" | "jobTemplate" => Some(Shape::Template),
            _ => None,
        },
        Shape::Template => match key {
            "metadata" => Some(Shape::Metadata),
            "spec" => Some(Shape::Spec),
            _ => None,
        },
        Shape::Containers => matches!(key, "name" | "image" | "resources").then_some(Shape::Any),
        Shape::Any => Some(Shape::Any),
    }
}

/// The shape of the items of a sequence of `shape`.
fn item(shape: Shape) -> Shape {
    match shape {
        Shape::Top | Shape::Items => Shape::Object,
        Shape::Containers => Shape::Containers,
        _ => Shape::Any,
    }
}

impl<'de> Visitor<'de> for Keep<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.b.charge(NODE_COST, 1)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.b.charge(NODE_COST, 1)?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.b.charge(NODE_COST, 1)?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.b.charge(NODE_COST, 1)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.b.charge(NODE_COST + STRING_COST + v.len() as u64, 1 + v.len() as u64)?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.b.charge(NODE_COST + STRING_COST + v.len() as u64, 1 + v.len() as u64)?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.b.charge(NODE_COST, 1)?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.b.charge(SEQ_COST, 1)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Keep { b: self.b, shape: item(self.shape) })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.b.charge(MAP_COST, 1)?;
        let mut out = Map::new();
        let mut merged: Vec<Value> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            // The key's allocation and its slot in the B-tree (nodes are often half full).
            self.b.charge(2 * STRING_COST + key.len() as u64, 1 + key.len() as u64)?;
            if self.b.yaml && key == "<<" {
                // A merge key (YAML 1.1, which Kubernetes' YAML reader honours): its map, or
                // each map of its list, fills in the keys this map does not set itself.
                match map.next_value_seed(Keep { b: self.b, shape: self.shape })? {
                    Value::Array(a) => merged.extend(a),
                    v => merged.push(v),
                }
                continue;
            }
            let kept = match child(self.shape, &key) {
                Some(shape) => Some(map.next_value_seed(Keep { b: self.b, shape })?),
                // Other top-level members of an object: scalars kept (a bare label map),
                // anything larger read past.
                None if matches!(self.shape, Shape::Top | Shape::Object | Shape::Items) => {
                    map.next_value_seed(Scalar { b: self.b })?
                }
                None => {
                    map.next_value_seed(Skip { b: self.b })?;
                    None
                }
            };
            if out.contains_key(&key) {
                return Err(self
                    .b
                    .refuse(format!("the key {:?} is given twice in one map: refused", crate::escape::text(&key))));
            }
            if let Some(v) = kept {
                out.insert(key, v);
            }
        }
        for m in merged {
            let Value::Object(m) = m else {
                return Err(self.b.refuse("a merge key (<<) that is not a map or a list of maps".into()));
            };
            for (k, v) in m {
                out.entry(k).or_insert(v);
            }
        }
        Ok(Value::Object(out))
    }
}

/// A scalar, kept; a sequence or map, read past (None).
struct Scalar<'b> {
    b: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for Scalar<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scalar<'_> {
    type Value = Option<Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_bool(v).map(Some)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_i64(v).map(Some)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_u64(v).map(Some)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_f64(v).map(Some)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_str(v).map(Some)
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_string(v).map(Some)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Keep { b: self.b, shape: Shape::Any }.visit_unit().map(Some)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip { b: self.b }.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip { b: self.b }.visit_map(map).map(|_| None)
    }
}

/// Reads past a value, counting the work (an alias expanded inside it is read again, and
/// counted again).
struct Skip<'b> {
    b: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.b.charge(0, 1 + v.len() as u64)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.b.charge(0, 1 + v.len() as u64)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.b.charge(0, 1)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.b.charge(0, 1)?;
        while seq.next_element_seed(Skip { b: self.b })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.b.charge(0, 1)?;
        while map.next_key_seed(Skip { b: self.b })?.is_some() {
            map.next_value_seed(Skip { b: self.b })?;
        }
        Ok(())
    }
}

/// Refuses YAML whose flow collections nest deeper than [`MAX_FLOW_DEPTH`], before libyaml
/// sees it: its scanner walks every open flow level at every token, so 200 KB of `[` take
/// minutes. A scan of YAML's lexical structure as far as flow nesting goes: quoted scalars,
/// comments and block scalars are passed over; `[` and `{` open a collection where a value
/// starts (line start, after `- `, `: `, `? `, `--- `, an anchor or a tag) or inside one.
/// Where it errs it errs high (it may count a bracket libyaml reads as text, never miss one
/// libyaml opens short of an error that stops libyaml first).
pub fn flow_depth(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let n = b.len();
    let ws = |c: u8| c == b' ' || c == b'\t';
    let eol = |c: u8| c == b'\n' || c == b'\r';
    let mut depth = 0usize;
    let mut i = 0;
    // At a line's start or after an indicator: a value may begin here.
    let mut value_start = true;
    let mut line_start = 0;
    while i < n {
        let c = b[i];
        if eol(c) {
            i += 1;
            line_start = i;
            value_start = depth == 0 || value_start;
            continue;
        }
        let prev_ws = i == 0 || ws(b[i - 1]) || eol(b[i - 1]);
        let next_ws = i + 1 >= n || ws(b[i + 1]) || eol(b[i + 1]);
        if c == b'#' && prev_ws {
            while i < n && !eol(b[i]) {
                i += 1;
            }
            continue;
        }
        if ws(c) {
            i += 1;
            continue;
        }
        if depth > 0 {
            match c {
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Err(too_deep(text, i));
                    }
                    value_start = true;
                }
                b']' | b'}' => {
                    depth -= 1;
                    value_start = false;
                }
                b',' | b':' | b'?' => value_start = true,
                b'"' | b'\'' if value_start => {
                    i = end_of_quoted(b, i);
                    value_start = false;
                    continue;
                }
                b'&' | b'!' if value_start => {
                    while i < n && !ws(b[i]) && !eol(b[i]) && !matches!(b[i], b',' | b'[' | b']' | b'{' | b'}') {
                        i += 1;
                    }
                    continue;
                }
                _ => value_start = false,
            }
            i += 1;
            continue;
        }
        // Block context.
        match c {
            b'[' | b'{' if value_start => {
                depth = 1;
                value_start = true;
            }
            // `- ` continues a value start (`- - [`); `: ` and `? ` make one.
            b'-' | b'?' | b':' if next_ws => value_start = c != b'-' || value_start,
            b'-' if value_start && b[i..].starts_with(b"---") && (i + 3 >= n || ws(b[i + 3]) || eol(b[i + 3])) => {
                i += 3;
                value_start = true;
                continue;
            }
            b'"' | b'\'' if value_start => {
                let end = end_of_quoted(b, i);
                if let Some(nl) = b[i..end].iter().rposition(|&c| c == b'\n') {
                    line_start = i + nl + 1;
                }
                i = end;
                value_start = false;
                continue;
            }
            b'&' | b'!' if value_start => {
                while i < n && !ws(b[i]) && !eol(b[i]) {
                    i += 1;
                }
                continue;
            }
            b'|' | b'>' if value_start => {
                i = end_of_block_scalar(b, line_start, i);
                line_start = i;
                value_start = true;
                continue;
            }
            _ => value_start = false,
        }
        i += 1;
    }
    Ok(())
}

/// Refuses a YAML stream larger than [`MAX_YAML`], or with a document larger than
/// [`MAX_YAML_DOCUMENT`]. Documents end where a line starts with `---` or `...` (a marker
/// no scalar may hold, so libyaml splits there too).
fn yaml_sizes(text: &str) -> Result<(), String> {
    let give_json = "(give JSON: `kubectl get -o json`)";
    if text.len() > MAX_YAML {
        return Err(format!(
            "{} MiB of YAML; YAML larger than {} MiB is refused {give_json}",
            text.len() >> 20,
            MAX_YAML >> 20
        ));
    }
    let (mut start, mut at, mut line, mut first_line) = (0, 0, 1, 1);
    for l in text.split_inclusive('\n') {
        let marker = (l.starts_with("---") || l.starts_with("..."))
            && l.as_bytes().get(3).is_none_or(|c| c.is_ascii_whitespace());
        if marker || at + l.len() == text.len() {
            let end = if marker { at } else { text.len() };
            if end - start > MAX_YAML_DOCUMENT {
                return Err(format!(
                    "the document at line {first_line}: {} KiB of YAML; a YAML document larger than {} KiB is \
                     refused {give_json}",
                    (end - start) >> 10,
                    MAX_YAML_DOCUMENT >> 10
                ));
            }
            if marker {
                (start, first_line) = (at, line);
            }
        }
        at += l.len();
        line += 1;
    }
    Ok(())
}

fn too_deep(text: &str, at: usize) -> String {
    let line = text[..at].bytes().filter(|&c| c == b'\n').count() + 1;
    format!("line {line}: flow collections nested deeper than {MAX_FLOW_DEPTH}: refused")
}

/// Past the quoted scalar starting at `i` (its closing quote; the end of the text if none).
fn end_of_quoted(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if q == b'"' && b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q {
            // '' inside a single-quoted scalar is a quote, not its end.
            if q == b'\'' && b.get(j + 1) == Some(&b'\'') {
                j += 2;
                continue;
            }
            return j + 1;
        }
        j += 1;
    }
    b.len()
}

/// Past the block scalar whose indicator (`|`, `>`) is at `i` on the line starting at
/// `line_start`: the start of the first line after it that is neither blank nor indented
/// deeper than the node it belongs to (the key on that line, or the `- ` entry it follows
/// directly).
fn end_of_block_scalar(b: &[u8], line_start: usize, i: usize) -> usize {
    let mut col = line_start;
    let mut dash = None;
    while col < i && b[col] == b' ' {
        col += 1;
    }
    while col < i && matches!(b[col], b'-' | b'?') && b.get(col + 1).is_some_and(|&c| c == b' ' || c == b'\t') {
        dash = Some(col - line_start);
        col += 1;
        while col < i && (b[col] == b' ' || b[col] == b'\t') {
            col += 1;
        }
    }
    // `- |`: the entry's dash; `key: |`: the key. An indicator first on its line (its key on
    // the line above) belongs to a node indented less than it; taking the most it could be
    // ends the skip early rather than late, so no line libyaml parses goes unscanned.
    let parent: isize = match (col == i, dash) {
        (false, _) => (col - line_start) as isize,
        (true, Some(d)) => d as isize,
        (true, None) => (i - line_start) as isize - 1,
    };
    let mut j = i;
    while j < b.len() && b[j] != b'\n' {
        j += 1;
    }
    loop {
        if j >= b.len() {
            return b.len();
        }
        let start = j + 1;
        let mut k = start;
        while k < b.len() && b[k] == b' ' {
            k += 1;
        }
        let blank = k >= b.len() || b[k] == b'\n' || b[k] == b'\r';
        let indent = (k - start) as isize;
        let marker = parent < 0 && (b[start..].starts_with(b"---") || b[start..].starts_with(b"..."));
        if !blank && (indent <= parent || marker) {
            return start;
        }
        j = k;
        while j < b.len() && b[j] != b'\n' {
            j += 1;
        }
    }
}
