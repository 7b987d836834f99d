//! ClickHouse's `numbers(N)`, `numbers(start, N)` and `numbers_mt(..)` table functions: one
//! non-nullable `UInt64` column `number` holding `start, start + 1, ..`, generated a morsel
//! at a time when a query reads it (nothing is materialized; `numbers(300000000)` costs no
//! memory before a query runs). `numbers_mt` is the same table: Tessera's queries read
//! morsels on every worker anyway.

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use sqlparser::ast::{self, FunctionArg, FunctionArgExpr};
use tessera_common::{ColumnSource, Error, Result, Table};

/// Rows per morsel of a `numbers` table: 65,536, the chunk size of Tessera's readers.
const MORSEL_ROWS: u64 = 65_536;

/// The rows of a `numbers` table.
#[derive(Debug)]
struct Numbers {
    start: u64,
    count: u64,
}

impl Numbers {
    fn morsel(&self, m: usize) -> ArrayRef {
        let lo = m as u64 * MORSEL_ROWS;
        let hi = (lo + MORSEL_ROWS).min(self.count);
        Arc::new(UInt64Array::from_iter_values((lo..hi).map(|i| self.start.wrapping_add(i))))
    }

    fn morsels(&self) -> usize {
        self.count.div_ceil(MORSEL_ROWS) as usize
    }
}

impl ColumnSource for Numbers {
    fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        let all: Vec<usize> = (0..self.morsels()).collect();
        self.load_morsels(indices, &all)
    }

    fn reads_morsels(&self) -> bool {
        true
    }

    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        Ok(indices.iter().map(|_| morsels.iter().map(|&m| self.morsel(m)).collect()).collect())
    }

    fn min_max(&self, _column: usize) -> Option<(ArrayRef, ArrayRef)> {
        // Only while the values do not wrap past u64::MAX (then min/max per morsel differ).
        if self.start.checked_add(self.count).is_none() {
            return None;
        }
        let n = self.morsels() as u64;
        let lo = UInt64Array::from_iter_values((0..n).map(|m| self.start + m * MORSEL_ROWS));
        let hi = UInt64Array::from_iter_values((0..n).map(|m| self.start + ((m + 1) * MORSEL_ROWS).min(self.count) - 1));
        Some((Arc::new(lo), Arc::new(hi)))
    }
}

/// The table a `SELECT` without `FROM` reads: ClickHouse's `system.one`, one row of one
/// `UInt8` column `dummy` holding 0 (`SELECT 1 + 1` is one row, as in ClickHouse and DuckDB).
pub(crate) fn one() -> Result<Arc<Table>> {
    let schema = Arc::new(Schema::new(vec![Field::new("dummy", DataType::UInt8, false)]));
    let dummy: ArrayRef = Arc::new(arrow::array::UInt8Array::from(vec![0u8]));
    Ok(Arc::new(Table::from_columns("one", schema, vec![vec![dummy]])?))
}

/// The table of `numbers(args)` / `numbers_mt(args)`, if `name` is one of them.
///
/// # Errors
/// [`Error::Plan`] for arguments other than one or two non-negative integer constants.
pub(crate) fn table_function(name: &str, args: &[FunctionArg]) -> Option<Result<Arc<Table>>> {
    let lower = name.to_ascii_lowercase();
    if lower != "numbers" && lower != "numbers_mt" {
        return None;
    }
    Some((|| {
        let ints = args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(v))) => match &v.value {
                    ast::Value::Number(n, _) => n.parse::<u64>().ok(),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| Error::plan(format!("{name}() takes one or two non-negative integer constants")))?;
        let (start, count) = match ints.as_slice() {
            [n] => (0, *n),
            [s, n] => (*s, *n),
            _ => return Err(Error::plan(format!("{name}() takes one or two arguments, got {}", ints.len()))),
        };
        let src = Numbers { start, count };
        let mut lens = vec![MORSEL_ROWS as usize; src.morsels()];
        if let Some(last) = lens.last_mut() {
            *last = (count - (src.morsels() as u64 - 1) * MORSEL_ROWS) as usize;
        }
        let schema = Arc::new(Schema::new(vec![Field::new("number", DataType::UInt64, false)]));
        Ok(Arc::new(Table::lazy(&lower, schema, lens, Some(Arc::new(src)))?))
    })())
}
