//! Escaping for every string a user, an image or a registry chose (file names, tags, env
//! values, registry error bodies): such a string must never move the cursor, erase a line or end
//! a table cell, so it cannot forge a finding or a "passed".

use std::fmt::Write;

/// For terminals and plain text: control characters (C0, DEL, C1) and Unicode line/bidi
/// controls become visible escapes (`\x1b`, `\n`, `\u{202e}`). Everything else is kept (a
/// name that merely looks escaped stays visible text; it cannot move the cursor).
pub fn text(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x100 => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        // Line/paragraph separators and bidirectional overrides reorder or break lines.
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// For a Markdown table cell: terminal escapes as in [`text`] (so no newline ends the row),
/// then `|`, backticks, brackets and backslashes backslash-escaped, `<` and `&` as entities and
/// GFM's autolink openers broken, so a value stays inside its cell and cannot open code spans,
/// links, images, autolinks, HTML tags, comments or entities.
pub fn markdown(s: &str) -> String {
    let t = text(s);
    let mut out = String::with_capacity(t.len() + 8);
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => out.push_str("&lt;"),
            '&' => out.push_str("&amp;"),
            // What opens a link or an image, ends a table cell or opens code, backslash-escaped
            // (CommonMark lets any ASCII punctuation be), and the backslash itself so a name
            // cannot undo an escape. Emphasis is left alone: it changes no meaning.
            '|' | '`' | '\\' | '[' | ']' | '@' => {
                out.push('\\');
                out.push(c);
            }
            // GFM's extended autolinks: `scheme://` and `www.` (and `a@b.c`, above).
            ':' if chars.peek() == Some(&'/') => out.push_str("\\:"),
            '.' if out.len() >= 3 && out.as_bytes()[out.len() - 3..].eq_ignore_ascii_case(b"www") => {
                out.push_str("\\.")
            }
            c => out.push(c),
        }
    }
    out
}

/// For HTML text and attribute values: control characters as in [`text`] (a page printed or
/// piped to a terminal obeys raw ones, and a browser shows none of them), then `&`, `<`, `>`
/// and both quotes as entities, so a value opens no tag, ends no attribute and starts no
/// entity.
pub fn html(s: &str) -> String {
    let t = text(s);
    let mut out = String::with_capacity(t.len() + 8);
    for c in t.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A Markdown inline code span holding `s` (escaped as text, with a backtick fence longer than
/// any run of backticks inside, as CommonMark allows). Pipes are entity-escaped since a table
/// cell ends at `|` even inside code.
pub fn markdown_code(s: &str) -> String {
    let t = text(s).replace('|', "\\|");
    let longest = t.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if t.starts_with('`') || t.ends_with('`') || t.is_empty() { " " } else { "" };
    format!("{fence}{pad}{t}{pad}{fence}")
}

/// A relative path as a SARIF artifact URI (RFC 3986 path): every byte outside the unreserved
/// set and `/` is percent-encoded, so `?`, `#`, `%`, spaces and control characters stay part of
/// the path.
pub fn uri_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_names_open_no_link_image_or_autolink() {
        let m = markdown("[approve](https://evil).so ![x](y) www.evil.com a@b.c ✓www.x <i> &lt;");
        for live in ["[approve]", "https://", "![", "www.", "<i>", "a@b"] {
            assert!(!m.contains(live), "{live} in {m}");
        }
        assert!(m.ends_with(" &amp;lt;"), "{m}");
        assert_eq!(markdown("sm_90 (native): libfoo.so"), "sm_90 (native): libfoo.so");
    }

    #[test]
    fn hostile_names_are_visible_and_inert() {
        let evil = "lib\x1b[2K\rpassed\n|x`y\u{9b}\u{202e}.so";
        let t = text(evil);
        assert!(!t.chars().any(|c| c.is_control()), "{t:?}");
        assert_eq!(t, "lib\\x1b[2K\\rpassed\\n|x`y\\x9b\\u{202e}.so");
        assert_eq!(text("plain/name.so"), "plain/name.so");
        assert_eq!(markdown(evil), "lib\\\\x1b\\[2K\\\\rpassed\\\\n\\|x\\`y\\\\x9b\\\\u{202e}.so");
        assert_eq!(markdown("<!-- a"), "&lt;!-- a");
        assert_eq!(html(evil), "lib\\x1b[2K\\rpassed\\n|x`y\\x9b\\u{202e}.so");
        assert_eq!(html("<script>\u{85}\x7f\"'&"), "&lt;script&gt;\\x85\\x7f&quot;&#39;&amp;");
        assert_eq!(markdown_code("a`b|c"), "``a`b\\|c``");
        assert_eq!(uri_path("usr/lib/a b#?%\n.so"), "usr/lib/a%20b%23%3F%25%0A.so");
    }
}
