//! A span scanner over JSON text serde_json has already accepted (`--enrich`'s SBOM): it finds
//! where values start and end, so the input can be edited in place without re-serializing it,
//! and walks arrays one item at a time, so a large input costs no more than its text.

/// The most members an object of the SBOM that is read (the document, a component, a hash) may
/// have; a CycloneDX component has a few dozen.
const MAX_MEMBERS: usize = 1024;

/// What the scanner refuses. The texts are what users see (the report layer passes them on).
#[derive(Debug, thiserror::Error)]
pub enum SpanError {
    /// The text's structure: JSON serde accepted but the scanner did not, or past a bound.
    #[error("{0}")]
    Shape(&'static str),
    /// A key serde could not read.
    #[error(transparent)]
    Json(serde_json::Error),
}

pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

const TRUNCATED: SpanError = SpanError::Shape("truncated JSON");

/// End (exclusive) of the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Result<usize, SpanError> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        // Not `ok_or(TRUNCATED)?`: that builds and drops an error at every byte.
        let Some(&c) = b.get(j) else { return Err(TRUNCATED) };
        match c {
            b'"' => {
                // To the closing quote, a backslash's escaped byte skipped (memchr: strings are
                // most of an SBOM).
                j += 1;
                loop {
                    let Some(k) = b.get(j..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) else {
                        return Err(TRUNCATED);
                    };
                    j += k;
                    if b[j] == b'"' {
                        break;
                    }
                    j += 2;
                }
                j += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                j += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1).ok_or(SpanError::Shape("unbalanced JSON"))?;
                j += 1;
            }
            _ if depth == 0 => {
                // A number or literal at the top of this value.
                while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    j += 1;
                }
                return Ok(j);
            }
            _ => j += 1,
        }
        if depth == 0 {
            return Ok(j);
        }
    }
}

/// Members of the object at `i` (`{`): key, value start, value end. A key given twice is
/// refused: readers of the SBOM disagree on which one counts (most take the last, an edit of
/// the first would be lost).
pub fn members(b: &[u8], i: usize) -> Result<Vec<(String, usize, usize)>, SpanError> {
    if b.get(i) != Some(&b'{') {
        return Err(SpanError::Shape("expected a JSON object"));
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Ok(out);
    }
    loop {
        let ke = value_end(b, j)?;
        let key: String = serde_json::from_slice(&b[j..ke]).map_err(SpanError::Json)?;
        j = skip_ws(b, ke);
        j = skip_ws(b, j + 1); // ':'
        let ve = value_end(b, j)?;
        if !seen.insert(key.clone()) {
            return Err(SpanError::Shape(
                "a key given twice in one object of the SBOM (its readers disagree on which counts)",
            ));
        }
        if out.len() == MAX_MEMBERS {
            return Err(SpanError::Shape("an object of the SBOM with more than 1024 members"));
        }
        out.push((key, j, ve));
        j = skip_ws(b, ve);
        match b.get(j) {
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b'}') => return Ok(out),
            _ => return Err(SpanError::Shape("malformed JSON object")),
        }
    }
}

/// Items of the array at `i` (`[`), one at a time (start, end): an array of millions of items
/// costs nothing to walk.
pub fn items_of(b: &[u8], i: usize) -> Result<Items<'_>, SpanError> {
    if b.get(i) != Some(&b'[') {
        return Err(SpanError::Shape("expected a JSON array"));
    }
    let j = skip_ws(b, i + 1);
    Ok(Items { b, j, done: b.get(j) == Some(&b']') })
}

/// The last item of the array at `i`.
pub fn last_item(b: &[u8], i: usize) -> Result<Option<(usize, usize)>, SpanError> {
    let mut last = None;
    for item in items_of(b, i)? {
        last = Some(item?);
    }
    Ok(last)
}

pub struct Items<'a> {
    b: &'a [u8],
    j: usize,
    done: bool,
}

impl Iterator for Items<'_> {
    type Item = Result<(usize, usize), SpanError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let start = self.j;
        let e = match value_end(self.b, start) {
            Ok(e) => e,
            Err(err) => {
                self.done = true;
                return Some(Err(err));
            }
        };
        self.j = skip_ws(self.b, e);
        match self.b.get(self.j) {
            Some(b',') => self.j = skip_ws(self.b, self.j + 1),
            Some(b']') => self.done = true,
            _ => {
                self.done = true;
                return Some(Err(SpanError::Shape("malformed JSON array")));
            }
        }
        Some(Ok((start, e)))
    }
}

/// The string at `b[s..e]`, if that value is one.
pub fn string_at(b: &[u8], s: usize, e: usize) -> Option<String> {
    (b.get(s) == Some(&b'"')).then(|| serde_json::from_slice(&b[s..e]).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_nested_values() {
        let s = br#" { "a" : [1, {"b": "x\"]"}, []] , "c": -2.5e3, "d": {} } "#;
        let root = skip_ws(s, 0);
        let m = members(s, root).unwrap();
        let keys: Vec<&str> = m.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(keys, ["a", "c", "d"]);
        assert_eq!(&s[m[1].1..m[1].2], b"-2.5e3");
        let items: Vec<(usize, usize)> = items_of(s, m[0].1).unwrap().map(Result::unwrap).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(&s[items[1].0..items[1].1], br#"{"b": "x\"]"}"#);
        assert!(members(s, m[2].1).unwrap().is_empty());
    }
}
