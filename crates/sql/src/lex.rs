//! Tokenizing SQL with ClickHouse's string-literal escapes, then parsing with `sqlparser`.
//!
//! `sqlparser` unescapes `\%` and `\_` in string literals to `%` and `_`, so a LIKE pattern
//! could never escape its wildcards. ClickHouse's lexer decodes only the escape sequences
//! it knows (`\\ \' \" \n \t \r \0 \a \b \f \v \e \xHH`) and keeps the backslash before any
//! other character, so `LIKE '\%'` and `LIKE '\\%'` both reach LIKE as `\%`, a literal `%`.
//! This module tokenizes with `sqlparser`'s unescaping off, applies ClickHouse's rules to
//! every string literal and quoted identifier, and parses the tokens.

use sqlparser::ast::Statement;
use sqlparser::dialect::{ClickHouseDialect, Dialect, GenericDialect};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use tessera_common::{Error, Result};

/// Nesting depth of the SQL parser (ClickHouse's `max_parser_depth` default): deeper input
/// is a `Parse` error. `sqlparser` grows its stack as it recurses (its
/// `recursive-protection` feature) and the planner and executor flatten AND/OR chains, so
/// this depth stays well inside a 2 MiB thread stack.
const MAX_PARSER_DEPTH: usize = 1000;

/// Parses `sql` with the ClickHouse dialect, falling back to the generic one (the first
/// dialect's error is reported when both fail).
///
/// # Errors
/// [`Error::Parse`] for malformed SQL or a bad escape sequence (`\x` without two hex digits).
pub(crate) fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    parse_with(&ClickHouseDialect {}, sql).or_else(|e| parse_with(&GenericDialect {}, sql).map_err(|_| e))
}

fn parse_with(dialect: &dyn Dialect, sql: &str) -> Result<Vec<Statement>> {
    let parse_err = |e: &dyn std::fmt::Display| Error::Parse(e.to_string());
    let mut tokens = Tokenizer::new(dialect, sql).with_unescape(false).tokenize_with_location().map_err(|e| parse_err(&e))?;
    for t in &mut tokens {
        match &mut t.token {
            Token::SingleQuotedString(s) => *s = unescape_literal(s, '\'')?,
            Token::DoubleQuotedString(s) => *s = unescape_literal(s, '"')?,
            Token::Word(w) => {
                if let Some(q) = w.quote_style {
                    // Raw mode keeps a doubled closing quote doubled: `"a""b"` is `a"b`.
                    let doubled: String = [q, q].iter().collect();
                    if w.value.contains(&doubled) {
                        w.value = w.value.replace(&doubled, &q.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    Parser::new(dialect)
        .with_recursion_limit(MAX_PARSER_DEPTH)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(|e| parse_err(&e))
}

/// Decodes a raw string literal body (between its quotes) as ClickHouse's lexer does: a
/// doubled quote is one quote; `\\ \' \" \n \t \r \0 \a \b \f \v \e` and `\xHH` are
/// decoded; a backslash before any other character is kept with it (`\%` stays `\%`, for
/// LIKE). A trailing lone backslash is kept.
///
/// # Errors
/// [`Error::Parse`] when `\x` is not followed by two hex digits, or the bytes are not UTF-8.
pub(crate) fn unescape_literal(raw: &str, quote: char) -> Result<String> {
    if !raw.contains('\\') && !raw.contains(quote) {
        return Ok(raw.to_string());
    }
    let b = raw.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == quote as u8 && b.get(i + 1) == Some(&c) {
            out.push(c);
            i += 2;
            continue;
        }
        if c != b'\\' || i + 1 == b.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let n = b[i + 1];
        let decoded = match n {
            b'\\' | b'\'' | b'"' | b'`' | b'/' | b'=' => Some(n),
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'0' => Some(0),
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'v' => Some(11),
            b'e' => Some(27),
            b'x' => {
                let hex = b.get(i + 2..i + 4).and_then(|h| std::str::from_utf8(h).ok());
                let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| {
                    Error::Parse(format!("bad escape sequence \\x in string literal '{raw}' (two hex digits expected)"))
                })?;
                out.push(v);
                i += 4;
                continue;
            }
            _ => None,
        };
        match decoded {
            Some(v) => out.push(v),
            None => out.extend_from_slice(&[b'\\', n]),
        }
        i += 2;
    }
    String::from_utf8(out).map_err(|_| Error::Parse(format!("string literal '{raw}' is not valid UTF-8 after unescaping")))
}

#[cfg(test)]
mod tests {
    use super::unescape_literal;

    #[test]
    fn clickhouse_escapes() {
        let u = |s: &str| unescape_literal(s, '\'').unwrap();
        assert_eq!(u(r"plain"), "plain");
        assert_eq!(u(r"it''s"), "it's");
        assert_eq!(u(r"it\'s"), "it's");
        assert_eq!(u(r"a\\b"), r"a\b");
        assert_eq!(u(r"tab\there\n"), "tab\there\n");
        assert_eq!(u(r"\%\_"), r"\%\_");
        assert_eq!(u(r"\w"), r"\w");
        assert_eq!(u(r"\x41\x62"), "Ab");
        assert_eq!(u(r"end\"), r"end\");
        assert!(unescape_literal(r"\xZZ", '\'').is_err());
    }
}
