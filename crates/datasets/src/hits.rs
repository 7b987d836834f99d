//! The ClickBench `hits` table: its 105-column schema and its 43 official queries, both taken
//! verbatim from `datasets/clickbench/` (see the license note there).

use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use tessera_common::{Error, Result};

/// `create.sql` of ClickBench (ClickHouse dialect), embedded at build time.
pub const CREATE_SQL: &str = include_str!("../../../datasets/clickbench/create.sql");

/// `queries.sql` of ClickBench: the 43 queries, one per line, Q1..Q43 in order.
pub const QUERIES_SQL: &str = include_str!("../../../datasets/clickbench/queries.sql");

/// Number of official ClickBench queries.
pub const QUERY_COUNT: usize = 43;

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields = parse_create_table(CREATE_SQL)
        .expect("the embedded create.sql is a valid ClickBench table definition");
    Arc::new(Schema::new(fields))
});

static PARQUET_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(TimeUnit::Second, tz) => f
                .as_ref()
                .clone()
                .with_data_type(DataType::Timestamp(TimeUnit::Millisecond, tz.clone())),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
});

static QUERIES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    QUERIES_SQL
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
});

/// The schema of `hits`: the 105 columns of `create.sql`, same names and order, all
/// non-nullable.
///
/// Types: BIGINT → Int64, INTEGER → Int32, SMALLINT → Int16, TEXT / VARCHAR(n) / CHAR →
/// Utf8, TIMESTAMP → Timestamp(Second, no time zone; values are UTC seconds), Date → Date32.
pub fn schema() -> SchemaRef {
    Arc::clone(&SCHEMA)
}

/// The schema of the Parquet files written by [`crate::generate::write_parquet`]: as
/// [`schema`], except that the three TIMESTAMP columns are Timestamp(Millisecond), because
/// Parquet has no seconds unit (arrow-rs would write seconds as a bare INT64 that DuckDB and
/// others read as BIGINT).
pub fn parquet_schema() -> SchemaRef {
    Arc::clone(&PARQUET_SCHEMA)
}

/// Official query `n` (1..=43), as one line of SQL ending with `;`.
///
/// # Errors
/// [`Error::InvalidArgument`] if `n` is not in 1..=43.
pub fn query(n: usize) -> Result<&'static str> {
    let queries = &*QUERIES;
    match n.checked_sub(1).and_then(|i| queries.get(i)) {
        Some(q) => Ok(q),
        None => Err(Error::InvalidArgument(format!(
            "ClickBench query number {n} is out of range 1..={}",
            queries.len()
        ))),
    }
}

/// The 43 official queries, Q1 first.
pub fn queries() -> Vec<&'static str> {
    QUERIES.clone()
}

/// Parses the column lines of a `CREATE TABLE name ( col TYPE [NOT NULL], ... )` statement
/// as written in ClickBench's `create.sql`: one column per line, up to the first line that
/// is not a column (`PRIMARY KEY`, `)`).
fn parse_create_table(sql: &str) -> Result<Vec<Field>> {
    let bad = |what: String| Error::InvalidArgument(format!("create.sql: {what}"));
    let body = sql
        .split_once('(')
        .map(|(_, rest)| rest)
        .ok_or_else(|| bad("no column list".into()))?;
    let mut fields = Vec::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("PRIMARY KEY") || upper.starts_with(')') {
            break;
        }
        let mut words = line.trim_end_matches(',').split_whitespace();
        let (Some(name), Some(ty)) = (words.next(), words.next()) else {
            return Err(bad(format!("cannot read column line '{line}'")));
        };
        let rest: Vec<String> = words.map(|w| w.to_ascii_uppercase()).collect();
        let nullable =
            !(rest.len() >= 2 && rest[rest.len() - 2] == "NOT" && rest[rest.len() - 1] == "NULL");
        let base = ty.split('(').next().unwrap_or(ty).to_ascii_uppercase();
        let data_type = match base.as_str() {
            "BIGINT" => DataType::Int64,
            "INTEGER" | "INT" => DataType::Int32,
            "SMALLINT" => DataType::Int16,
            "TEXT" | "VARCHAR" | "CHAR" | "STRING" => DataType::Utf8,
            "TIMESTAMP" | "DATETIME" => DataType::Timestamp(TimeUnit::Second, None),
            "DATE" => DataType::Date32,
            other => return Err(bad(format!("column {name}: unsupported type {other}"))),
        };
        fields.push(Field::new(name, data_type, nullable));
    }
    if fields.is_empty() {
        return Err(bad("no columns".into()));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_has_the_105_columns_of_create_sql() {
        let s = schema();
        assert_eq!(s.fields().len(), 105);
        assert_eq!(s.field(0).name(), "WatchID");
        assert_eq!(s.field(104).name(), "CLID");
        assert!(s.fields().iter().all(|f| !f.is_nullable()));
        let ty = |n: &str| s.field_with_name(n).unwrap().data_type().clone();
        assert_eq!(ty("WatchID"), DataType::Int64);
        assert_eq!(ty("JavaEnable"), DataType::Int16);
        assert_eq!(ty("Title"), DataType::Utf8);
        assert_eq!(ty("EventTime"), DataType::Timestamp(TimeUnit::Second, None));
        assert_eq!(ty("EventDate"), DataType::Date32);
        assert_eq!(ty("CounterID"), DataType::Int32);
        assert_eq!(ty("UserAgentMinor"), DataType::Utf8);
        assert_eq!(ty("HitColor"), DataType::Utf8);
        // Every column line of create.sql, in order.
        let lines: Vec<&str> = CREATE_SQL
            .lines()
            .map(str::trim)
            .filter(|l| l.ends_with("NOT NULL,"))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(lines, names);
        let p = parquet_schema();
        assert_eq!(
            p.field_with_name("EventTime").unwrap().data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, None)
        );
        assert_eq!(p.fields().len(), 105);
    }

    #[test]
    fn parser_rejects_garbage() {
        assert!(parse_create_table("nothing here").is_err());
        assert!(parse_create_table("CREATE TABLE t (\n a BLOB NOT NULL\n)").is_err());
        let f = parse_create_table("CREATE TABLE t (\n a INT,\n b VARCHAR(3) NOT NULL\n)").unwrap();
        assert!(f[0].is_nullable() && !f[1].is_nullable());
    }

    #[test]
    fn queries_are_the_43_lines() {
        assert_eq!(queries().len(), QUERY_COUNT);
        assert_eq!(query(1).unwrap(), "SELECT COUNT(*) FROM hits;");
        assert!(
            query(43)
                .unwrap()
                .starts_with("SELECT DATE_TRUNC('minute', EventTime)")
        );
        assert!(matches!(query(0), Err(Error::InvalidArgument(_))));
        assert!(matches!(query(44), Err(Error::InvalidArgument(_))));
    }
}
