//! Statements that change data: `CREATE TABLE`, `INSERT INTO .. VALUES`, `OPTIMIZE TABLE`.
//! They are planned here and carried out by the engine on its on-disk tables.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use sqlparser::ast::{self, ColumnOption, Expr, OneOrManyWithParens, SetExpr, TableConstraint, UnaryOperator};
use tessera_common::{Error, Result, Table};

use crate::statement::Statement;

/// `CREATE TABLE name (col TYPE [NOT NULL], ..) [ENGINE = MergeTree] ORDER BY (..)`.
/// Columns are nullable unless `NOT NULL`; `PRIMARY KEY (..)` serves as the sort key when
/// there is no `ORDER BY` (as in ClickHouse, where the primary key defaults to it).
pub(crate) fn create_table(ct: &ast::CreateTable) -> Result<Statement> {
    if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return Err(Error::not_implemented("CREATE TABLE .. AS / LIKE / CLONE"));
    }
    let mut fields = Vec::with_capacity(ct.columns.len());
    for c in &ct.columns {
        let not_null = c.options.iter().any(|o| matches!(o.option, ColumnOption::NotNull | ColumnOption::PrimaryKey(_)));
        let dt = data_type(&c.data_type).ok_or_else(|| {
            Error::not_implemented(format!("column {} of type {}", c.name.value, c.data_type))
        })?;
        fields.push(Field::new(c.name.value.clone(), dt, !not_null));
    }
    if fields.is_empty() {
        return Err(Error::plan("CREATE TABLE needs at least one column"));
    }
    let exprs_names = |exprs: &[Expr]| -> Result<Vec<String>> {
        exprs
            .iter()
            .map(|e| match e {
                Expr::Identifier(i) => Ok(i.value.clone()),
                Expr::Tuple(_) | Expr::Nested(_) => Err(Error::plan("nested sort key")),
                other => Err(Error::not_implemented(format!("sort key expression {other}"))),
            })
            .collect()
    };
    let mut order_by = match &ct.order_by {
        Some(OneOrManyWithParens::One(Expr::Tuple(v))) => exprs_names(v)?,
        Some(OneOrManyWithParens::One(Expr::Nested(e))) => exprs_names(std::slice::from_ref(e))?,
        Some(OneOrManyWithParens::One(e)) => exprs_names(std::slice::from_ref(e))?,
        Some(OneOrManyWithParens::Many(v)) => exprs_names(v)?,
        None => Vec::new(),
    };
    if order_by.is_empty() {
        for c in &ct.constraints {
            if let TableConstraint::PrimaryKey(pk) = c {
                for ic in &pk.columns {
                    match &ic.column.expr {
                        Expr::Identifier(i) => order_by.push(i.value.clone()),
                        other => return Err(Error::not_implemented(format!("primary key expression {other}"))),
                    }
                }
            }
        }
    }
    if order_by.is_empty()
        && let Some(pk) = &ct.primary_key
    {
        order_by = match pk.as_ref() {
            Expr::Tuple(v) => exprs_names(v)?,
            Expr::Nested(e) => exprs_names(std::slice::from_ref(e))?,
            e => exprs_names(std::slice::from_ref(e))?,
        };
    }
    Ok(Statement::CreateTable {
        name: object_name(&ct.name),
        schema: Arc::new(Schema::new(fields)),
        order_by,
        if_not_exists: ct.if_not_exists,
    })
}

/// SQL type to the Arrow type Tessera stores. ClickHouse names (`UInt32`, `String`,
/// `DateTime`) and standard ones (`INTEGER`, `VARCHAR(n)`, `TIMESTAMP`) are accepted.
fn data_type(t: &ast::DataType) -> Option<DataType> {
    use ast::DataType as S;
    Some(match t {
        S::TinyInt(_) | S::Int8(_) => DataType::Int8,
        S::SmallInt(_) | S::Int16 | S::Int2(_) => DataType::Int16,
        S::Int(_) | S::Integer(_) | S::Int32 | S::Int4(_) | S::MediumInt(_) => DataType::Int32,
        S::BigInt(_) | S::Int64 => DataType::Int64,
        S::UInt8 => DataType::UInt8,
        S::UInt16 => DataType::UInt16,
        S::UInt32 => DataType::UInt32,
        S::UInt64 => DataType::UInt64,
        S::Float32 | S::Real => DataType::Float32,
        S::Float64 | S::Double(_) | S::DoublePrecision | S::Float(_) => DataType::Float64,
        S::Text | S::String(_) | S::Varchar(_) | S::Char(_) | S::CharVarying(_) | S::Character(_) | S::Nvarchar(_) => {
            DataType::Utf8
        }
        S::Bytea | S::Blob(_) | S::Binary(_) | S::Varbinary(_) => DataType::Binary,
        S::Date => DataType::Date32,
        S::Timestamp(_, _) | S::Datetime(_) | S::Datetime64(_, _) => DataType::Timestamp(TimeUnit::Second, None),
        S::Nullable(inner) => return data_type(inner),
        S::LowCardinality(inner) => return data_type(inner),
        _ => return None,
    })
}

fn object_name(n: &ast::ObjectName) -> String {
    n.0.iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => i.value.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// `INSERT INTO t [(cols)] VALUES (..), (..)`: literals are cast to the column types
/// (strict: a value that does not convert is an error); missing columns are NULL.
pub(crate) fn insert(ins: &ast::Insert, catalog: &dyn Fn(&str) -> Option<Arc<Table>>) -> Result<Statement> {
    let name = match &ins.table {
        ast::TableObject::TableName(n) => object_name(n),
        other => return Err(Error::not_implemented(format!("INSERT INTO {other}"))),
    };
    let table = catalog(&name).ok_or_else(|| Error::UnknownTable(name.clone()))?;
    let schema = table.schema().clone();
    let targets: Vec<usize> = if ins.columns.is_empty() {
        (0..schema.fields().len()).collect()
    } else {
        ins.columns
            .iter()
            .map(|c| {
                let c = object_name(c);
                table.column_index(&c).ok_or_else(|| Error::UnknownColumn { table: name.clone(), column: c })
            })
            .collect::<Result<_>>()?
    };
    let Some(source) = &ins.source else { return Err(Error::not_implemented("INSERT without VALUES")) };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return Err(Error::not_implemented("INSERT .. SELECT"));
    };
    let mut texts: Vec<Vec<Option<String>>> = vec![Vec::with_capacity(values.rows.len()); schema.fields().len()];
    for (r, row) in values.rows.iter().enumerate() {
        if row.len() != targets.len() {
            return Err(Error::plan(format!("VALUES row {} has {} values for {} columns", r + 1, row.len(), targets.len())));
        }
        for col in texts.iter_mut() {
            col.push(None);
        }
        for (e, &c) in row.iter().zip(&targets) {
            texts[c][r] = literal(e)?;
        }
    }
    let opts = CastOptions { safe: false, ..Default::default() };
    let columns = schema
        .fields()
        .iter()
        .zip(texts)
        .map(|(f, t)| {
            let s: ArrayRef = Arc::new(StringArray::from(t));
            let a = cast_with_options(&s, f.data_type(), &opts)
                .map_err(|e| Error::TypeMismatch(format!("INSERT into column {}: {e}", f.name())))?;
            if !f.is_nullable() && a.null_count() > 0 {
                return Err(Error::InvalidArgument(format!("NULL into NOT NULL column {}", f.name())));
            }
            Ok(a)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Statement::Insert { table: name, batch: RecordBatch::try_new(schema, columns)? })
}

fn literal(e: &Expr) -> Result<Option<String>> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Null => Ok(None),
            ast::Value::Number(n, _) => Ok(Some(n.to_string())),
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Ok(Some(s.clone())),
            ast::Value::Boolean(b) => Ok(Some(if *b { "1" } else { "0" }.into())),
            other => Err(Error::not_implemented(format!("literal {other} in VALUES"))),
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => Ok(literal(expr)?.map(|s| format!("-{s}"))),
        other => Err(Error::not_implemented(format!("expression {other} in VALUES"))),
    }
}

/// `OPTIMIZE TABLE t [FINAL]`.
pub(crate) fn optimize(name: &ast::ObjectName) -> Statement {
    Statement::Optimize { table: object_name(name) }
}

/// `INSERT INTO t [(c, ..)] [FROM INFILE 'path' [COMPRESSION 'none']] FORMAT Name [data]`,
/// as ClickHouse writes it: the rows follow in format `Name`, inline after the format
/// name (the whitespace up to and including the first line break skipped), or come from
/// the file, or (neither given) from the caller's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertFormat {
    /// Table name.
    pub table: String,
    /// The columns the input holds, in order; empty means all the table's.
    pub columns: Vec<String>,
    /// `FROM INFILE` path.
    pub infile: Option<String>,
    /// The format name as written.
    pub format: String,
    /// Byte offset in the statement where inline data starts (== its length when none).
    pub data: usize,
}

/// Parses `sql` as an `INSERT .. FORMAT` statement: `None` when it is not one (other
/// statements go to the SQL parser).
///
/// # Errors
/// [`Error::Parse`] for an `INSERT .. FORMAT` statement that is malformed;
/// [`Error::NotImplemented`] for a `COMPRESSION` other than `'none'` (ClickHouse means a
/// compressed file there; Tessera reads ClickHouse compressed blocks through its APIs'
/// compression argument and `tessera load --compression`).
pub fn insert_format(sql: &str) -> Option<Result<InsertFormat>> {
    let mut lx = Words { s: sql, pos: 0 };
    if !lx.keyword("INSERT") || !lx.keyword("INTO") {
        return None;
    }
    lx.keyword("TABLE");
    // Only statements with a FORMAT clause before any VALUES/SELECT are ours.
    let upper = sql.to_ascii_uppercase();
    let fmt_at = find_word(&upper, "FORMAT")?;
    if find_word(&upper[..fmt_at], "VALUES").is_some() || find_word(&upper[..fmt_at], "SELECT").is_some() {
        return None;
    }
    Some((|| {
        let table = lx.ident().ok_or_else(|| Error::Parse("INSERT INTO: expected a table name".into()))?;
        let mut columns = Vec::new();
        if lx.punct('(') {
            loop {
                columns.push(lx.ident().ok_or_else(|| Error::Parse("INSERT INTO t (..): expected a column name".into()))?);
                if lx.punct(')') {
                    break;
                }
                if !lx.punct(',') {
                    return Err(Error::Parse("INSERT INTO t (..): expected ',' or ')'".into()));
                }
            }
        }
        let mut infile = None;
        if lx.keyword("FROM") {
            if !lx.keyword("INFILE") {
                return Err(Error::Parse("INSERT INTO t FROM: expected INFILE".into()));
            }
            infile = Some(lx.string().ok_or_else(|| Error::Parse("FROM INFILE: expected a quoted path".into()))?);
            if lx.keyword("COMPRESSION") {
                let c = lx.string().ok_or_else(|| Error::Parse("COMPRESSION: expected a quoted name".into()))?;
                if !c.eq_ignore_ascii_case("none") {
                    return Err(Error::not_implemented(format!(
                        "COMPRESSION '{c}' in FROM INFILE (a compressed file); ClickHouse compressed blocks are read with \
                         the compression argument of the API or `tessera load --compression`"
                    )));
                }
            }
        }
        if !lx.keyword("FORMAT") {
            return Err(Error::Parse("INSERT .. FORMAT: expected FORMAT after the table (and columns, FROM INFILE)".into()));
        }
        let format = lx.ident().ok_or_else(|| Error::Parse("FORMAT: expected a format name".into()))?;
        // Inline data starts after the whitespace up to and including the first newline.
        let rest = &sql[lx.pos..];
        let mut data = lx.pos;
        for (i, c) in rest.char_indices() {
            if c == '\n' {
                data = lx.pos + i + 1;
                break;
            }
            if !c.is_whitespace() {
                data = lx.pos + i;
                break;
            }
            data = lx.pos + i + c.len_utf8();
        }
        if infile.is_some() && !sql[data..].trim().is_empty() {
            return Err(Error::Parse("INSERT .. FROM INFILE .. FORMAT: no data may follow the format name".into()));
        }
        Ok(InsertFormat { table, columns, infile, format, data })
    })())
}

/// The byte offset of `word` as a whole word in `upper`, outside quotes.
fn find_word(upper: &str, word: &str) -> Option<usize> {
    let b = upper.as_bytes();
    let mut quote = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' || c == b'`' => quote = Some(c),
            None if upper[i..].starts_with(word)
                && (i == 0 || !is_word(b[i - 1]))
                && b.get(i + word.len()).is_none_or(|&n| !is_word(n)) =>
            {
                return Some(i);
            }
            None => {}
        }
        i += 1;
    }
    None
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A cursor over the words of an `INSERT .. FORMAT` statement.
struct Words<'a> {
    s: &'a str,
    pos: usize,
}

impl Words<'_> {
    fn skip_ws(&mut self) {
        let rest = &self.s[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn keyword(&mut self, kw: &str) -> bool {
        self.skip_ws();
        let rest = &self.s.as_bytes()[self.pos..];
        if rest.len() >= kw.len() && rest[..kw.len()].eq_ignore_ascii_case(kw.as_bytes()) && rest.get(kw.len()).is_none_or(|&c| !is_word(c)) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.s[self.pos..].starts_with(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// A name: bare (letters, digits, `_`, `.`) or quoted with `"` or backquotes.
    fn ident(&mut self) -> Option<String> {
        self.skip_ws();
        let rest = &self.s[self.pos..];
        if let Some(q) = rest.chars().next().filter(|&c| c == '"' || c == '`') {
            let end = rest[1..].find(q)?;
            self.pos += end + 2;
            return Some(rest[1..=end].to_string());
        }
        let n = rest.bytes().take_while(|&c| is_word(c) || c == b'.').count();
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some(rest[..n].to_string())
    }

    fn string(&mut self) -> Option<String> {
        self.skip_ws();
        let rest = &self.s[self.pos..];
        let body = rest.strip_prefix('\'')?;
        let end = body.find('\'')?;
        self.pos += end + 2;
        Some(body[..end].to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_format_statements() {
        let f = insert_format("INSERT INTO t FORMAT CSV\n1,2\n").unwrap().unwrap();
        assert_eq!((f.table.as_str(), f.format.as_str(), &"INSERT INTO t FORMAT CSV\n1,2\n"[f.data..]), ("t", "CSV", "1,2\n"));
        let f = insert_format("insert into db.t (a, `b c`) from infile '/x/y.bin' compression 'none' format Native").unwrap().unwrap();
        assert_eq!(f.columns, vec!["a".to_string(), "b c".to_string()]);
        assert_eq!(f.infile.as_deref(), Some("/x/y.bin"));
        assert_eq!(f.format, "Native");
        assert!(insert_format("INSERT INTO t VALUES (1, 'FORMAT')").is_none());
        assert!(insert_format("SELECT 1").is_none());
        assert!(matches!(insert_format("INSERT INTO t FROM INFILE 'a' COMPRESSION 'lz4' FORMAT CSV"), Some(Err(Error::NotImplemented(_)))));
        assert!(matches!(insert_format("INSERT INTO t FORMAT"), Some(Err(Error::Parse(_)))));
        assert!(matches!(insert_format("INSERT INTO t FROM INFILE 'a' FORMAT CSV 1,2"), Some(Err(Error::Parse(_)))));
    }
}
