//! ClickHouse `JSONEachRow`: one JSON object per row, one row per line.
//!
//! Writing follows ClickHouse's defaults (`output_format_json_quote_64bit_integers = 0`,
//! `output_format_json_escape_forward_slashes = 1`): numbers bare, NULL as `null`, dates
//! and timestamps as strings, strings with `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`,
//! `\u00XX` for other control bytes and `\u2028`/`\u2029`, and bytes that are not UTF-8
//! as they are. One deviation, so that every value reads back: NaN and infinities are the
//! strings `"nan"`, `"inf"`, `"-inf"` (ClickHouse's `output_format_json_quote_denormals =
//! 1`; its default writes `null`, losing them). ClickHouse reads both.
//!
//! Reading accepts objects separated by whitespace or commas, optionally inside one
//! `[ .. ]`; numbers bare or quoted, `true`/`false` as 1/0, `null`; keys are matched to
//! the target columns by name; a target column a row omits is NULL (an error when not
//! nullable); an unknown key is an error (nothing is dropped silently).

use std::collections::HashMap;
use std::io::{BufRead, Write};

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use tessera_common::{Error, Result};

use crate::builder::{ColumnBuilder, show, write_date, write_datetime};
use crate::parallel::{Framing, ParallelChunks, Position, Walk};
use crate::text::{TextCol, write_f32, write_f64, write_i64, write_u64};
use crate::{BatchReader, BatchWriter, READ_BATCH_ROWS, ReadOptions, corrupt, out_err};

/// Appends `s` as a JSON string, escaped as ClickHouse escapes it.
pub(crate) fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'/' => b"\\/",
            8 => b"\\b",
            12 => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
                i += 1;
                start = i;
                continue;
            }
            0xe2 if s.get(i + 1) == Some(&0x80) && matches!(s.get(i + 2), Some(0xa8 | 0xa9)) => {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(if s[i + 2] == 0xa8 { b"\\u2028" } else { b"\\u2029" });
                i += 3;
                start = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&s[start..i]);
        out.extend_from_slice(esc);
        i += 1;
        start = i;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// Writes batches as JSONEachRow lines.
pub struct JsonWriter<'a> {
    out: Box<dyn Write + Send + 'a>,
    /// `"name":` of each column, escaped.
    keys: Vec<Vec<u8>>,
    buf: Vec<u8>,
}

impl<'a> JsonWriter<'a> {
    /// A writer of batches of `schema`.
    ///
    /// # Errors
    /// None today; the signature matches the other writers.
    pub fn new(schema: &SchemaRef, out: Box<dyn Write + Send + 'a>) -> Result<Self> {
        let keys = schema
            .fields()
            .iter()
            .map(|f| {
                let mut k = Vec::new();
                json_string(&mut k, f.name().as_bytes());
                k.push(b':');
                k
            })
            .collect();
        Ok(JsonWriter { out, keys, buf: Vec::new() })
    }
}

impl BatchWriter for JsonWriter<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let cols: Vec<(TextCol<'_>, Option<arrow::buffer::NullBuffer>)> =
            batch.columns().iter().map(|c| Ok((TextCol::new(c)?, c.logical_nulls()))).collect::<Result<_>>()?;
        for r in 0..batch.num_rows() {
            self.buf.push(b'{');
            for (c, (tc, nulls)) in cols.iter().enumerate() {
                if c > 0 {
                    self.buf.push(b',');
                }
                self.buf.extend_from_slice(&self.keys[c]);
                if nulls.as_ref().is_some_and(|n| n.is_null(r)) {
                    self.buf.extend_from_slice(b"null");
                    continue;
                }
                let out = &mut self.buf;
                match tc {
                    TextCol::Int(f) => write_i64(out, f(r)),
                    TextCol::UInt(f) => write_u64(out, f(r)),
                    TextCol::F32(a) if a.value(r).is_finite() => write_f32(out, a.value(r)),
                    TextCol::F64(a) if a.value(r).is_finite() => write_f64(out, a.value(r)),
                    TextCol::F32(a) => quoted(out, |o| write_f64(o, f64::from(a.value(r)))),
                    TextCol::F64(a) => quoted(out, |o| write_f64(o, a.value(r))),
                    TextCol::Date(a) => quoted(out, |o| write_date(o, i64::from(a.value(r)))),
                    TextCol::Time(a) => quoted(out, |o| write_datetime(o, a.value(r))),
                    TextCol::Str(a) => json_string(out, a.get(r)),
                    TextCol::Other(f) => {
                        use std::io::Write as _;
                        let _ = write!(out, "{}", f.value(r));
                    }
                }
            }
            self.buf.extend_from_slice(b"}\n");
            if self.buf.len() >= crate::SINK_BUFFER_BYTES {
                self.out.write_all(&self.buf).map_err(out_err)?;
                self.buf.clear();
            }
        }
        self.out.write_all(&self.buf).map_err(out_err)?;
        self.buf.clear();
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.out.flush().map_err(out_err)
    }
}

fn quoted(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    out.push(b'"');
    f(out);
    out.push(b'"');
}

/// A byte cursor over a buffered reader, refilled a chunk at a time.
struct Cursor<R: BufRead> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    /// Bytes consumed before `buf[0]`.
    offset: u64,
    eof: bool,
}

impl<R: BufRead> Cursor<R> {
    #[inline]
    fn peek(&mut self) -> std::io::Result<Option<u8>> {
        if self.pos == self.buf.len() {
            return self.refill();
        }
        Ok(Some(self.buf[self.pos]))
    }

    /// [`Cursor::peek`] at the end of the buffered bytes: the next chunk of input.
    #[cold]
    fn refill(&mut self) -> std::io::Result<Option<u8>> {
        if self.eof {
            return Ok(None);
        }
        self.offset += self.buf.len() as u64;
        self.buf.clear();
        self.pos = 0;
        let chunk = self.src.fill_buf()?;
        if chunk.is_empty() {
            self.eof = true;
            return Ok(None);
        }
        self.buf.extend_from_slice(chunk);
        let n = chunk.len();
        self.src.consume(n);
        Ok(Some(self.buf[self.pos]))
    }

    #[inline]
    fn bump(&mut self) {
        self.pos += 1;
    }

    /// Whether the buffered bytes from the cursor on are `key` and a closing quote (then
    /// consumed): a key written without escapes.
    #[inline]
    fn eat_key(&mut self, key: &[u8]) -> bool {
        let rest = &self.buf[self.pos..];
        if rest.len() > key.len() && rest[key.len()] == b'"' && &rest[..key.len()] == key {
            self.pos += key.len() + 1;
            return true;
        }
        false
    }

    /// The buffered bytes from the cursor on, up to the first `"` or `\\` (what a string
    /// can copy at once), consumed.
    #[inline]
    fn plain_run(&mut self) -> &[u8] {
        let rest = &self.buf[self.pos..];
        let n = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
        self.pos += n;
        &self.buf[self.pos - n..self.pos]
    }

    #[inline]
    fn skip_ws(&mut self) -> std::io::Result<Option<u8>> {
        while let Some(c) = self.peek()? {
            if !c.is_ascii_whitespace() {
                return Ok(Some(c));
            }
            self.bump();
        }
        Ok(None)
    }
}

/// Reads JSONEachRow rows into batches of the target schema.
pub struct JsonReader<R: BufRead> {
    cur: Cursor<R>,
    opts: ReadOptions,
    schema: SchemaRef,
    keys: HashMap<Vec<u8>, usize>,
    rows: u64,
    done: bool,
    in_array: bool,
    key: Vec<u8>,
    val: Vec<u8>,
    /// The column the next key most likely names (the one after the last key's).
    next_col: usize,
    /// Per column: its name has no `"` or `\\`, so it is written without escapes and can
    /// be matched in the input as it is.
    plain_names: Vec<bool>,
}

/// A JSON value's kind, as far as a column needs it.
enum Val {
    Null,
    /// A string; its unescaped bytes are in `val`.
    Str,
    /// A number, `true` (as `1`) or `false` (as `0`); its text is in `val`.
    Num,
}

impl<R: BufRead> JsonReader<R> {
    /// A reader into `opts.schema`.
    ///
    /// # Errors
    /// None before the first row; the signature matches the other readers.
    pub fn new(src: R, opts: &ReadOptions) -> Result<Self> {
        Self::new_at(src, opts, 0, 0)
    }

    /// A reader of input that starts after `rows` rows and `offset` bytes (a chunk of a
    /// [`JsonFraming`]): errors name the row and byte in the whole input.
    fn new_at(src: R, opts: &ReadOptions, rows: u64, offset: u64) -> Result<Self> {
        let schema = opts.schema.clone().expect("checked by reader()");
        let mut keys = HashMap::new();
        for (i, f) in schema.fields().iter().enumerate() {
            keys.insert(f.name().as_bytes().to_vec(), i);
        }
        for (i, f) in schema.fields().iter().enumerate() {
            keys.entry(f.name().to_ascii_lowercase().into_bytes()).or_insert(i);
        }
        let plain_names = schema.fields().iter().map(|f| !f.name().bytes().any(|c| c == b'"' || c == b'\\')).collect();
        Ok(JsonReader {
            cur: Cursor { src, buf: Vec::new(), pos: 0, offset, eof: false },
            opts: opts.clone(),
            schema,
            keys,
            rows,
            done: false,
            in_array: false,
            key: Vec::new(),
            val: Vec::new(),
            next_col: 0,
            plain_names,
        })
    }

    fn bad(&self, what: impl std::fmt::Display) -> Error {
        corrupt(
            &self.opts.source,
            format!("row {} (byte {}): {what}", self.rows + 1, self.cur.offset + self.cur.pos as u64),
        )
    }

    fn io(&self, e: std::io::Error) -> Error {
        crate::in_err(&self.opts.source, e)
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        match self.cur.skip_ws().map_err(|e| self.io(e))? {
            Some(x) if x == c => {
                self.cur.bump();
                Ok(())
            }
            Some(x) => Err(self.bad(format!("expected '{}', found {}", c as char, show(&[x])))),
            None => Err(self.bad(format!("expected '{}', found the end of input", c as char))),
        }
    }

    /// Reads a JSON string (after its opening quote) unescaped into `out`.
    fn string_into(&mut self, which: bool) -> Result<()> {
        let mut out = std::mem::take(if which { &mut self.key } else { &mut self.val });
        out.clear();
        let res = (|| -> Result<()> {
            loop {
                // The bytes up to the next quote or backslash at once.
                out.extend_from_slice(self.cur.plain_run());
                let c = self.cur.peek().map_err(|e| self.io(e))?.ok_or_else(|| self.bad("a string is not closed"))?;
                self.cur.bump();
                match c {
                    b'"' => return Ok(()),
                    b'\\' => {
                        let e = self.cur.peek().map_err(|e| self.io(e))?.ok_or_else(|| self.bad("a string is not closed"))?;
                        self.cur.bump();
                        match e {
                            b'n' => out.push(b'\n'),
                            b't' => out.push(b'\t'),
                            b'r' => out.push(b'\r'),
                            b'b' => out.push(8),
                            b'f' => out.push(12),
                            b'0' => out.push(0),
                            b'u' => {
                                let mut cp = self.hex4()?;
                                if (0xd800..0xdc00).contains(&cp) {
                                    // A surrogate pair: \uD83D\uDE00.
                                    self.expect_raw(b'\\')?;
                                    self.expect_raw(b'u')?;
                                    let lo = self.hex4()?;
                                    if !(0xdc00..0xe000).contains(&lo) {
                                        return Err(self.bad("a lone UTF-16 surrogate in \\u escapes"));
                                    }
                                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                }
                                let ch = char::from_u32(cp).ok_or_else(|| self.bad("a lone UTF-16 surrogate in \\u escapes"))?;
                                let mut b = [0u8; 4];
                                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                            }
                            other => out.push(other),
                        }
                    }
                    c => out.push(c),
                }
            }
        })();
        if which {
            self.key = out;
        } else {
            self.val = out;
        }
        res
    }

    fn expect_raw(&mut self, c: u8) -> Result<()> {
        match self.cur.peek().map_err(|e| self.io(e))? {
            Some(x) if x == c => {
                self.cur.bump();
                Ok(())
            }
            _ => Err(self.bad("a lone UTF-16 surrogate in \\u escapes")),
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let c = self.cur.peek().map_err(|e| self.io(e))?.ok_or_else(|| self.bad("a \\u escape is cut short"))?;
            self.cur.bump();
            let d = (c as char).to_digit(16).ok_or_else(|| self.bad("a bad \\u escape"))?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// Reads one value into `val`.
    fn value(&mut self) -> Result<Val> {
        let c = self.cur.skip_ws().map_err(|e| self.io(e))?.ok_or_else(|| self.bad("a value is missing"))?;
        if c == b'"' {
            self.cur.bump();
            self.string_into(false)?;
            return Ok(Val::Str);
        }
        if c == b'{' || c == b'[' {
            return Err(self.bad("nested objects and arrays are not supported (Tessera stores no nested types)"));
        }
        self.val.clear();
        // A number (or literal) that ends inside the buffered bytes, at once.
        let rest = &self.cur.buf[self.cur.pos..];
        let n = rest.iter().take_while(|&&c| number_byte(c)).count();
        if n < rest.len() {
            self.val.extend_from_slice(&rest[..n]);
            self.cur.pos += n;
        }
        while let Some(c) = self.cur.peek().map_err(|e| self.io(e))? {
            if number_byte(c) {
                self.val.push(c);
                self.cur.bump();
            } else {
                break;
            }
        }
        match self.val.as_slice() {
            b"null" => Ok(Val::Null),
            b"true" => {
                self.val = b"1".to_vec();
                Ok(Val::Num)
            }
            b"false" => {
                self.val = b"0".to_vec();
                Ok(Val::Num)
            }
            b"" => Err(self.bad(format!("unexpected {}", show(&[c])))),
            _ => Ok(Val::Num),
        }
    }

    /// Reads one object into the builders; `false` at the end of input.
    fn row(&mut self, builders: &mut [ColumnBuilder], seen: &mut [bool]) -> Result<bool> {
        loop {
            match self.cur.skip_ws().map_err(|e| self.io(e))? {
                None => {
                    if self.in_array {
                        return Err(self.bad("the '[' of the rows is not closed"));
                    }
                    return Ok(false);
                }
                Some(b'[') if !self.in_array && self.rows == 0 => {
                    self.in_array = true;
                    self.cur.bump();
                }
                Some(b',') => self.cur.bump(),
                Some(b']') if self.in_array => {
                    self.cur.bump();
                    self.in_array = false;
                    if let Some(c) = self.cur.skip_ws().map_err(|e| self.io(e))? {
                        return Err(self.bad(format!("unexpected {} after the closing ']'", show(&[c]))));
                    }
                    return Ok(false);
                }
                Some(b'{') => break,
                Some(c) => return Err(self.bad(format!("expected an object, found {}", show(&[c])))),
            }
        }
        self.cur.bump();
        seen.iter_mut().for_each(|s| *s = false);
        self.next_col = 0;
        let mut first = true;
        loop {
            let c = self.cur.skip_ws().map_err(|e| self.io(e))?.ok_or_else(|| self.bad("an object is not closed"))?;
            if c == b'}' {
                self.cur.bump();
                break;
            }
            if !first {
                self.expect(b',')?;
                self.cur.skip_ws().map_err(|e| self.io(e))?;
            }
            first = false;
            self.expect(b'"')?;
            // Rows usually list the columns in order: the one after the last key first,
            // matched in place when its name needs no escapes.
            let next = self.next_col;
            let in_place = self.plain_names.get(next).copied().unwrap_or(false)
                && self.cur.eat_key(self.schema.field(next).name().as_bytes());
            if !in_place {
                self.string_into(true)?;
            }
            self.expect(b':')?;
            let col = match self.schema.fields().get(next) {
                _ if in_place => next,
                Some(f) if f.name().as_bytes() == self.key.as_slice() => next,
                // Another column's name, or the next one's written with escapes.
                _ => self
                    .keys
                    .get(&self.key)
                    .or_else(|| self.keys.get(&self.key.to_ascii_lowercase()))
                    .copied()
                    .ok_or_else(|| self.bad(format!("key {} names no column of the table", show(&self.key))))?,
            };
            self.next_col = col + 1;
            let kind = self.value()?;
            let label = |m: String| format!("column {} ({}): {m}", col + 1, self.schema.field(col).name());
            let b = &mut builders[col];
            let res = match kind {
                Val::Null => b.push_null(),
                Val::Str => b.push_bytes(&self.val),
                Val::Num if b.is_bytes() => Err("a number for a string column".into()),
                Val::Num => b.push_text(&self.val),
            };
            res.map_err(|m| self.bad(label(m)))?;
            if std::mem::replace(&mut seen[col], true) {
                return Err(self.bad(label("the key appears twice".into())));
            }
        }
        for (c, b) in builders.iter_mut().enumerate() {
            if !seen[c] {
                b.push_null().map_err(|m| self.bad(format!("column {} ({}) is missing: {m}", c + 1, self.schema.field(c).name())))?;
            }
        }
        self.rows += 1;
        Ok(true)
    }

    fn read_batch(&mut self) -> Result<Option<RecordBatch>> {
        let mut builders = self
            .schema
            .fields()
            .iter()
            .map(|f| ColumnBuilder::new(f.data_type(), f.is_nullable(), 1024))
            .collect::<Result<Vec<_>>>()?;
        let mut seen = vec![false; builders.len()];
        let first = self.rows;
        let mut n = 0;
        while n < READ_BATCH_ROWS && !builders.iter().any(ColumnBuilder::is_full) {
            if !self.row(&mut builders, &mut seen)? {
                self.done = true;
                break;
            }
            n += 1;
        }
        if n == 0 {
            return Ok(None);
        }
        let mut cols = Vec::with_capacity(builders.len());
        for (c, b) in builders.iter_mut().enumerate() {
            cols.push(b.finish().map_err(|(r, m)| {
                corrupt(
                    &self.opts.source,
                    format!("row {}, column {} ({}): {m}", first + r as u64 + 1, c + 1, self.schema.field(c).name()),
                )
            })?);
        }
        Ok(Some(RecordBatch::try_new(self.schema.clone(), cols)?))
    }
}

impl<R: BufRead> Iterator for JsonReader<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_batch() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<R: BufRead + Send> BatchReader for JsonReader<R> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Whether `c` belongs to an unquoted JSON value (a number, `true`, `false`, `null`).
#[inline]
fn number_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')
}

/// Where the whole rows of `bytes` (which starts between rows) end: after the last line
/// break outside every object and string, or the last top-level object's `}`, and how many
/// rows (top-level objects) end before it. [`Walk::Short`] when none ends in `bytes` (a row
/// longer than `bytes`, an unclosed string); [`Walk::Bad`] for a stray closing bracket
/// before any row ends (its chunk's parser reports it).
fn rows_end(bytes: &[u8]) -> std::result::Result<(usize, u64), Walk> {
    let (mut depth, mut i, mut rows) = (0i64, 0, 0u64);
    let mut last = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // To the string's closing quote, over escapes.
                i += 1;
                loop {
                    let Some(j) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else { return last.ok_or(Walk::Short) };
                    if bytes[i + j] == b'"' {
                        i += j;
                        break;
                    }
                    i += j + 2;
                    if i >= bytes.len() {
                        return last.ok_or(Walk::Short);
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth < 0 {
                    // A stray closing bracket: the rows before it, or (first) damage that
                    // its chunk's parser reports.
                    return last.ok_or(Walk::Bad);
                }
                if depth == 0 && bytes[i] == b'}' {
                    // Rows may also follow each other on one line (`{..},{..}`): a cut
                    // after a whole object is a row boundary too.
                    rows += 1;
                    last = Some((i + 1, rows));
                }
            }
            b'\n' if depth == 0 => last = Some((i + 1, rows)),
            _ => {}
        }
        i += 1;
    }
    last.ok_or(Walk::Short)
}

/// JSONEachRow input cut into chunks of whole rows ([`crate::parallel`], ClickHouse's
/// `input_format_parallel_parsing`): after the last line break outside every object and
/// string ([`rows_end`]); each chunk is parsed by a [`JsonReader`] told the rows and bytes
/// before it, so an error names its row and byte in the whole input. Input that is one
/// `[ .. ]` array is read by one [`JsonReader`] (see [`reader`]).
struct JsonFraming {
    opts: ReadOptions,
}

impl Framing for JsonFraming {
    fn unit(&self, buf: &[u8]) -> std::result::Result<(usize, u64), Walk> {
        // All the whole rows at once; damage is left to the parser of the rest.
        rows_end(buf)
    }

    fn parse(&self, bytes: &[u8], at: Position) -> Vec<Result<RecordBatch>> {
        JsonReader::new_at(bytes, &self.opts, at.rows, at.bytes).map_or_else(|e| vec![Err(e)], Iterator::collect)
    }
}

/// A JSONEachRow reader of `src` into `opts.schema`: rows one object after another are
/// parsed in parallel ([`JsonFraming`]); input that opens with `[` (the rows as one JSON
/// array) by one [`JsonReader`].
///
/// # Errors
/// [`Error::Io`] reading the first bytes.
pub(crate) fn reader<'a, R: BufRead + Send + 'a>(mut src: R, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    let schema = opts.schema.clone().expect("checked by reader()");
    // The first byte that is not whitespace.
    let mut head = Vec::new();
    let array = loop {
        let got = src.fill_buf().map_err(|e| crate::in_err(&opts.source, e))?;
        if got.is_empty() {
            break false;
        }
        let n = got.len();
        let first = got.iter().position(|c| !c.is_ascii_whitespace()).map(|i| got[i]);
        head.extend_from_slice(got);
        src.consume(n);
        if let Some(c) = first {
            break c == b'[';
        }
    };
    let src = std::io::Read::chain(std::io::Cursor::new(head), src);
    if array {
        return Ok(Box::new(JsonReader::new(src, opts)?));
    }
    let framing = JsonFraming { opts: opts.clone() };
    Ok(Box::new(ParallelChunks::new(src, framing, schema, opts.source.clone(), Position::default(), None)))
}
