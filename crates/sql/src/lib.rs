//! Tessera's SQL front end: parses with `sqlparser` (ClickHouse dialect, falling back to
//! the generic one) and plans the supported subset into [`tessera_exec::Plan`]s.
//!
//! Supported: `SELECT` over one table with columns, aliases, `*`, expressions
//! ([`tessera_exec::expr::Expr`]: arithmetic, comparisons, `AND`/`OR`/`NOT`, `IN`,
//! `BETWEEN`, `CASE`, `IS NULL`, `CAST`, `LIKE`/`ILIKE`, functions), `COUNT(*)`,
//! `COUNT(x)`, `COUNT(DISTINCT x)`, `SUM`, `AVG`, `MIN`, `MAX` of expressions; `WHERE`
//! (column-vs-constant comparisons, LIKE shapes and IN lists on the SIMD predicates, the
//! rest as a general expression); `GROUP BY` by expression, alias or position; `HAVING`;
//! `ORDER BY` by output alias, expression, aggregate or position, `ASC`/`DESC`,
//! `NULLS FIRST/LAST` (default NULLS LAST, as ClickHouse and DuckDB); `LIMIT`, `OFFSET`; a
//! query's `SETTINGS name = value` clause; `SET name = value`.
//! On-disk tables: `CREATE TABLE .. ORDER BY (..)`, `INSERT INTO .. VALUES`,
//! `INSERT INTO .. [FROM INFILE 'f'] FORMAT F` ([`insert_format`]), `OPTIMIZE TABLE`
//! (carried out by the engine). Table functions `numbers(N)`, `numbers(start, N)`,
//! `numbers_mt(..)`.
//! Anything else is [`Error::NotImplemented`] naming the construct.

#![warn(missing_docs)]

mod ddl;
mod lex;
mod numbers;
mod planner;
mod statement;

pub use ddl::{InsertFormat, insert_format};
pub use planner::plan;
pub use statement::Statement;
pub use tessera_common::{Error, Result};
