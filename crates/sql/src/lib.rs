//! Tessera's SQL front end: parses with `sqlparser` (ClickHouse dialect, falling back to
//! the generic one) and plans the supported subset into [`tessera_exec::Plan`]s.
//!
//! Supported: `SELECT` over one table with columns, aliases, `*`, `COUNT(*)`,
//! `COUNT(col)`, `SUM`, `AVG`, `MIN`, `MAX`, `extract(minute FROM ts)` / `toMinute(ts)`;
//! `WHERE` with `= <> < <= > >=` between columns and literals, `AND`/`OR`/`NOT`;
//! `GROUP BY` by column, alias or position; `ORDER BY` by output alias, column, aggregate
//! or position, `ASC`/`DESC`, `NULLS FIRST/LAST` (default NULLS LAST, as ClickHouse and
//! DuckDB); `LIMIT`, `OFFSET`; a query's `SETTINGS name = value` clause; `SET name = value`.
//! On-disk tables: `CREATE TABLE .. ORDER BY (..)`, `INSERT INTO .. VALUES`, `OPTIMIZE TABLE`
//! (carried out by the engine).
//! Anything else is [`Error::NotImplemented`] naming the construct.

#![warn(missing_docs)]

mod ddl;
mod lex;
mod planner;

pub use planner::{Statement, plan};
pub use tessera_common::{Error, Result};
