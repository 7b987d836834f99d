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
