//! What planning a SQL statement produces: a query plan, a setting, or a DDL/DML command
//! for the engine (its own module so that the planner and `ddl.rs` do not import each
//! other).

use tessera_exec::Plan;

/// A planned SQL statement.
#[derive(Debug)]
pub enum Statement {
    /// A query, with the settings of its `SETTINGS` clause (name, value) to apply to it.
    Query {
        /// The plan.
        plan: Plan,
        /// Per-query settings.
        settings: Vec<(String, String)>,
    },
    /// `SET name = value`: a setting for the session/database.
    Set {
        /// Setting name.
        name: String,
        /// Value as written (quotes removed).
        value: String,
    },
    /// `CREATE TABLE`: a new on-disk table.
    CreateTable {
        /// Table name.
        name: String,
        /// Columns (nullable unless `NOT NULL`).
        schema: arrow::datatypes::SchemaRef,
        /// Sort key column names (`ORDER BY`, else `PRIMARY KEY`), major first.
        order_by: Vec<String>,
        /// `IF NOT EXISTS` was given.
        if_not_exists: bool,
    },
    /// `INSERT INTO t VALUES ..`: rows already converted to the table's schema.
    Insert {
        /// Table name.
        table: String,
        /// The rows.
        batch: arrow::array::RecordBatch,
    },
    /// `OPTIMIZE TABLE t`: merge the table's parts.
    Optimize {
        /// Table name.
        table: String,
    },
}
