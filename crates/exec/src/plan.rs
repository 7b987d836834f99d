//! Physical plans: what the SQL front end produces and the executor runs.
//!
//! Column references are indices into the table's schema. Literals in predicates are
//! already coerced to the column's domain by the planner (dates to days, timestamps to
//! seconds, strings to bytes).

use std::sync::Arc;

use arrow::datatypes::DataType;
use tessera_common::Table;
pub use tessera_kernels::CmpOp;

use crate::expr::Expr;

/// A constant, coerced to the domain of the column it is compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Any integer, date (days since epoch) or timestamp (seconds since epoch).
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A string (compared bytewise).
    Bytes(Vec<u8>),
}

/// A boolean condition over the rows of one table (WHERE).
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `column <op> value`.
    Cmp {
        /// Column index.
        column: usize,
        /// Operator.
        op: CmpOp,
        /// Constant of the column's domain.
        value: Value,
    },
    /// `column <op> column` (both numeric, or both strings).
    CmpColumns {
        /// Left column index.
        left: usize,
        /// Operator.
        op: CmpOp,
        /// Right column index.
        right: usize,
    },
    /// All must hold.
    And(Vec<Predicate>),
    /// Any must hold.
    Or(Vec<Predicate>),
    /// Negation.
    Not(Box<Predicate>),
    /// A constant condition (for plans built through the API; the SQL planner folds
    /// out-of-range literals in the comparison kernels instead).
    Const(bool),
    /// A boolean expression that the forms above cannot express (arithmetic, functions,
    /// `IN`, `CASE`, `IS NULL`, LIKE patterns with `_` or an inner `%`): evaluated by
    /// [`crate::expr::evaluate`]; NULL is UNKNOWN.
    Expr(Box<Expr>),
    /// `column LIKE pattern` on a string column, for the pattern shapes in [`LikePattern`]
    /// (`NOT LIKE` is `Not(Like)`). Bytewise and case-sensitive, as in ClickHouse; NULL
    /// input gives UNKNOWN.
    Like {
        /// Column index (Utf8 or Binary).
        column: usize,
        /// The pattern, classified.
        pattern: LikePattern,
    },
}

/// The shapes of LIKE pattern that run without a regex: literal text with `%` at either
/// end or both (`\%`, `\_` and `\\` escape a literal character).
#[derive(Debug, Clone, PartialEq)]
pub enum LikePattern {
    /// `'%text%'`: the value contains `text` (the substring-search kernel).
    Contains(Vec<u8>),
    /// `'text%'`: the value starts with `text`.
    Prefix(Vec<u8>),
    /// `'%text'`: the value ends with `text`.
    Suffix(Vec<u8>),
    /// `'text'` (no wildcard): the value equals `text`.
    Exact(Vec<u8>),
}

impl LikePattern {
    /// Classifies a SQL LIKE pattern; `None` when it has `_` or an inner `%` (those need a
    /// general matcher).
    pub fn parse(pattern: &str) -> Option<LikePattern> {
        let b = pattern.as_bytes();
        let mut lit = Vec::with_capacity(b.len());
        let (mut lead, mut trail) = (false, false);
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' if i + 1 < b.len() => {
                    lit.push(b[i + 1]);
                    i += 2;
                    continue;
                }
                b'%' if lit.is_empty() && !trail => lead = true,
                b'%' if i == b.len() - 1 || b[i + 1..].iter().all(|&c| c == b'%') => {
                    trail = true;
                    break;
                }
                b'%' | b'_' => return None,
                c => lit.push(c),
            }
            i += 1;
        }
        Some(match (lead, trail) {
            (true, true) => LikePattern::Contains(lit),
            (true, false) if lit.is_empty() => LikePattern::Contains(lit),
            (true, false) => LikePattern::Suffix(lit),
            (false, true) => LikePattern::Prefix(lit),
            (false, false) => LikePattern::Exact(lit),
        })
    }
}

/// A per-row value computed from the table: a group key or an output column of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarExpr {
    /// A column as stored.
    Column(usize),
    /// Minute of hour (0..59, `UInt8`) of a `Timestamp(Second)` column, UTC
    /// (`extract(minute FROM c)`, ClickHouse `toMinute(c)`).
    Minute(usize),
    /// Expression `i` of the plan's `computed` list ([`AggregatePlan::computed`],
    /// [`ScanPlan::computed`]), computed per morsel.
    Computed(usize),
}

impl ScalarExpr {
    /// The column this expression reads.
    ///
    /// # Panics
    /// On [`ScalarExpr::Computed`], which may read several columns: see
    /// [`AggregatePlan::scalar_columns`].
    pub fn column(&self) -> usize {
        match *self {
            ScalarExpr::Column(c) | ScalarExpr::Minute(c) => c,
            ScalarExpr::Computed(i) => panic!("ScalarExpr::column of computed expression {i}"),
        }
    }

    /// The Arrow type this expression yields over `table` (`Null` for
    /// [`ScalarExpr::Computed`]: see [`AggregatePlan::scalar_type`]).
    pub fn data_type(&self, table: &Table) -> DataType {
        match *self {
            ScalarExpr::Column(c) => table.schema().field(c).data_type().clone(),
            ScalarExpr::Minute(_) => DataType::UInt8,
            ScalarExpr::Computed(_) => DataType::Null,
        }
    }
}

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// `COUNT(*)`: rows per group. Output Int64.
    CountStar,
    /// `COUNT(col)`: non-NULL values. Output Int64.
    Count,
    /// `SUM(col)`: Int64 for integers of up to 32 bits, Decimal128(38, 0) for 64-bit
    /// integers (DuckDB's HUGEINT, no overflow), Float64 for floats; NULL
    /// when the group has no non-NULL value.
    Sum,
    /// `AVG(col)`: Float64; NULL when no non-NULL value.
    Avg,
    /// `MIN(col)`: the input type; NULL when no non-NULL value.
    Min,
    /// `MAX(col)`: the input type; NULL when no non-NULL value.
    Max,
    /// `COUNT(DISTINCT col)` (ClickHouse `uniqExact`): the number of distinct non-NULL
    /// values, Int64. Floats are distinct in Tessera's order (`-0.0` = `0.0`, one NaN);
    /// strings bytewise.
    CountDistinct,
    /// ClickHouse `uniq`: the number of distinct non-NULL values, approximate (adaptive
    /// sampling: exact up to 65,536, ~1% error above), Int64.
    Uniq,
    /// ClickHouse `uniqHLL12`: approximate distinct count (HyperLogLog, 2^12 registers,
    /// exact up to 512 values), Int64.
    UniqHll12,
    /// ClickHouse `uniqCombined`: approximate distinct count (HyperLogLog, 2^17 registers,
    /// exact up to 16,384 values), Int64.
    UniqCombined,
    /// `varPop` / `var_pop`: population variance of numbers, Float64; NULL without a value.
    VarPop,
    /// `varSamp` / `var_samp` / `variance`: sample variance, Float64; NULL below two values.
    VarSamp,
    /// `stddevPop` / `stddev_pop`: population standard deviation, Float64.
    StddevPop,
    /// `stddevSamp` / `stddev_samp` / `stddev`: sample standard deviation, Float64; NULL
    /// below two values.
    StddevSamp,
    /// An exact quantile of numbers, dates or timestamps at a level in [0, 1]: `median`,
    /// `quantile_cont`, `quantile_disc` (DuckDB), `quantileExact`, `medianExact`, and
    /// `quantile` / `median` (ClickHouse's approximate ones, answered exactly). NULL
    /// without a value.
    Quantile(QuantileKind, QuantileLevel),
}

/// How a quantile picks its value among a group's `n` values, sorted in Tessera's order
/// (NaN last), at level `l`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantileKind {
    /// Linear interpolation at position `l * (n - 1)`: DuckDB's `quantile_cont` and `median`
    /// (ClickHouse's `quantile` and `median` approximate it). Float64, numbers only.
    Cont,
    /// The value at index `min(floor(l * n), n - 1)`: ClickHouse's `quantileExact` and
    /// `medianExact` (the upper median). The input type.
    Exact,
    /// The value at index `max(ceil(l * n) - 1, 0)`: DuckDB's `quantile_disc` (the lower
    /// median). The input type.
    Disc,
}

/// A quantile level in [0, 1], kept as its f64 bits so that [`AggFunc`] stays `Eq` and
/// `Hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantileLevel(u64);

impl QuantileLevel {
    /// The median's level.
    pub const HALF: QuantileLevel = QuantileLevel(0x3FE0_0000_0000_0000);

    /// `l` as a level; `None` outside [0, 1] (or NaN).
    pub const fn new(l: f64) -> Option<Self> {
        if l >= 0.0 && l <= 1.0 { Some(QuantileLevel((l + 0.0).to_bits())) } else { None }
    }

    /// The level.
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl AggFunc {
    /// The output type of the aggregate over an input of type `input` (`None` for
    /// `COUNT(*)`).
    pub fn output_type(self, input: Option<&DataType>) -> DataType {
        let float = input.is_some_and(|t| matches!(t, DataType::Float32 | DataType::Float64));
        let wide = input.is_some_and(|t| matches!(t, DataType::Int64 | DataType::UInt64 | DataType::Timestamp(_, _)));
        match self {
            AggFunc::Count
            | AggFunc::CountStar
            | AggFunc::CountDistinct
            | AggFunc::Uniq
            | AggFunc::UniqHll12
            | AggFunc::UniqCombined => DataType::Int64,
            AggFunc::Avg | AggFunc::VarPop | AggFunc::VarSamp | AggFunc::StddevPop | AggFunc::StddevSamp => {
                DataType::Float64
            }
            AggFunc::Sum if float => DataType::Float64,
            // 64-bit inputs sum into 128 bits (DuckDB's HUGEINT): no overflow below 2^63 rows.
            AggFunc::Sum if wide => DataType::Decimal128(38, 0),
            AggFunc::Sum => DataType::Int64,
            AggFunc::Min | AggFunc::Max => input.cloned().unwrap_or(DataType::Null),
            AggFunc::Quantile(QuantileKind::Cont, _) => DataType::Float64,
            AggFunc::Quantile(_, _) => input.cloned().unwrap_or(DataType::Null),
        }
    }

    /// The function a (lower-case) SQL name calls: standard SQL, ClickHouse's and DuckDB's
    /// names. `None` for names that are not aggregates.
    pub fn from_name(lower: &str) -> Option<AggFunc> {
        Some(match lower {
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "avg" => AggFunc::Avg,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            // `any` (ClickHouse) / `any_value` (DuckDB) may return any non-NULL value of the
            // group; the minimum is one, and the same on every run and thread count.
            "any" | "any_value" | "anylast" => AggFunc::Min,
            "uniqexact" => AggFunc::CountDistinct,
            "uniq" => AggFunc::Uniq,
            "uniqhll12" => AggFunc::UniqHll12,
            "uniqcombined" | "uniqcombined64" => AggFunc::UniqCombined,
            "varpop" | "var_pop" => AggFunc::VarPop,
            "varsamp" | "var_samp" | "variance" => AggFunc::VarSamp,
            "stddevpop" | "stddev_pop" => AggFunc::StddevPop,
            "stddevsamp" | "stddev_samp" | "stddev" => AggFunc::StddevSamp,
            // The level comes from the call (`quantile(0.9)(x)`, `quantile_cont(x, 0.9)`):
            // see `AggFunc::with_level`.
            "median" | "quantile" | "quantile_cont" => AggFunc::Quantile(QuantileKind::Cont, QuantileLevel::HALF),
            "medianexact" | "quantileexact" => AggFunc::Quantile(QuantileKind::Exact, QuantileLevel::HALF),
            "quantile_disc" => AggFunc::Quantile(QuantileKind::Disc, QuantileLevel::HALF),
            _ => return None,
        })
    }

    /// Whether the input must be a number (SUM, AVG, the variances, interpolated quantiles).
    pub fn needs_number(self) -> bool {
        matches!(
            self,
            AggFunc::Sum
                | AggFunc::Avg
                | AggFunc::VarPop
                | AggFunc::VarSamp
                | AggFunc::StddevPop
                | AggFunc::StddevSamp
                | AggFunc::Quantile(QuantileKind::Cont, _)
        )
    }

    /// Whether the function takes a level (the quantiles).
    pub fn takes_level(self) -> bool {
        matches!(self, AggFunc::Quantile(_, _))
    }

    /// The function at quantile level `l` (quantiles only; others unchanged).
    pub fn with_level(self, l: QuantileLevel) -> AggFunc {
        match self {
            AggFunc::Quantile(k, _) => AggFunc::Quantile(k, l),
            f => f,
        }
    }

    /// Whether the input must be ordered or hashed by value: a number, date, timestamp or
    /// string (MIN, MAX, the distinct counts).
    pub fn needs_value(self) -> bool {
        matches!(
            self,
            AggFunc::Min
                | AggFunc::Max
                | AggFunc::CountDistinct
                | AggFunc::Uniq
                | AggFunc::UniqHll12
                | AggFunc::UniqCombined
                | AggFunc::Quantile(_, _)
        )
    }
}

/// One aggregate of a GROUP BY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AggExpr {
    /// The function.
    pub func: AggFunc,
    /// Input (`None` only for `COUNT(*)`): a column or a computed expression.
    pub input: Option<ScalarExpr>,
}

/// Where an output column of an aggregation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOutput {
    /// Group key `i` of [`AggregatePlan::keys`].
    Key(usize),
    /// Aggregate `i` of [`AggregatePlan::aggs`].
    Agg(usize),
    /// Expression `i` of [`AggregatePlan::projections`], computed from other (key and
    /// aggregate) outputs after the aggregation: a GROUP BY key that is a function of other
    /// keys (`ClientIP - 1` beside `ClientIP`, a constant), `SUM(x + c)` as
    /// `SUM(x) + c * COUNT(x)`.
    Expr(usize),
}

/// One ORDER BY key, referring to an output column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    /// Index into the plan's output columns (visible or hidden).
    pub output: usize,
    /// Descending order.
    pub descending: bool,
    /// NULLs before non-NULLs. Default NULLS LAST in both directions (ClickHouse and
    /// DuckDB); the planner fills it in.
    pub nulls_first: bool,
}

/// ORDER BY / LIMIT / OFFSET of a query, over its output columns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OrderLimit {
    /// Sort keys, major first. Empty: any order.
    pub order_by: Vec<SortKey>,
    /// Maximum rows returned after `offset`.
    pub limit: Option<usize>,
    /// Rows skipped.
    pub offset: usize,
}

/// `SELECT keys.., aggs.. FROM t [WHERE ..] GROUP BY keys [ORDER BY ..] [LIMIT ..]`.
/// No GROUP BY (`SELECT COUNT(*) FROM t`) is an aggregation with zero keys: one row out.
#[derive(Debug, Clone)]
pub struct AggregatePlan {
    /// The table.
    pub table: Arc<Table>,
    /// Row filter applied before aggregation.
    pub filter: Option<Predicate>,
    /// Group keys.
    pub keys: Vec<ScalarExpr>,
    /// The expressions [`ScalarExpr::Computed`] keys and aggregate inputs refer to, over
    /// the table's columns. A computed key is evaluated on every morsel once, before the
    /// aggregation (its values back the key layouts' borrowed strings); a computed
    /// aggregate input per morsel inside the aggregation.
    pub computed: Vec<Expr>,
    /// Aggregates.
    pub aggs: Vec<AggExpr>,
    /// Expressions over the output columns (`Expr::Column(i)` is `output[i]`, which is a
    /// key or an aggregate) behind [`AggOutput::Expr`] outputs.
    pub projections: Vec<Expr>,
    /// HAVING: a boolean expression over the output columns (`Expr::Column(i)` is
    /// `output[i]`, hidden ones included); groups where it is not TRUE are dropped before
    /// ORDER BY and LIMIT.
    pub having: Option<Expr>,
    /// Output columns (name, source); the first `visible` are returned, the rest only
    /// serve ORDER BY.
    pub output: Vec<(String, AggOutput)>,
    /// Number of visible output columns.
    pub visible: usize,
    /// Sorting and limits.
    pub order: OrderLimit,
}

impl AggregatePlan {
    /// The type of key or aggregate input `e`.
    pub fn scalar_type(&self, e: &ScalarExpr) -> DataType {
        match e {
            ScalarExpr::Computed(i) => self.computed[*i].data_type(),
            other => other.data_type(&self.table),
        }
    }

    /// Appends the table columns `e` reads to `out`.
    pub fn scalar_columns(&self, e: &ScalarExpr, out: &mut Vec<usize>) {
        match e {
            ScalarExpr::Computed(i) => self.computed[*i].columns(out),
            other => out.push(other.column()),
        }
    }
}

/// `SELECT exprs FROM t [WHERE ..] [ORDER BY ..] [LIMIT ..]` (no aggregation).
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// The table.
    pub table: Arc<Table>,
    /// Row filter.
    pub filter: Option<Predicate>,
    /// Output columns (name, expression); the first `visible` are returned.
    pub output: Vec<(String, ScalarExpr)>,
    /// The expressions [`ScalarExpr::Computed`] outputs refer to, over the table's
    /// columns, evaluated on the rows WHERE keeps.
    pub computed: Vec<Expr>,
    /// Number of visible output columns.
    pub visible: usize,
    /// Sorting and limits.
    pub order: OrderLimit,
}

/// An executable query.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Hash aggregation.
    Aggregate(AggregatePlan),
    /// Filter/project scan.
    Scan(ScanPlan),
}

impl Plan {
    /// Columns of the table the plan reads (sorted, deduplicated).
    pub fn columns_used(&self) -> Vec<usize> {
        let mut cols = Vec::new();
        let filter = match self {
            Plan::Aggregate(p) => {
                for e in p.keys.iter().chain(p.aggs.iter().filter_map(|a| a.input.as_ref())) {
                    p.scalar_columns(e, &mut cols);
                }
                &p.filter
            }
            Plan::Scan(p) => {
                for (_, e) in &p.output {
                    match e {
                        ScalarExpr::Computed(i) => p.computed[*i].columns(&mut cols),
                        e => cols.push(e.column()),
                    }
                }
                &p.filter
            }
        };
        if let Some(f) = filter {
            predicate_columns(f, &mut cols);
        }
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// String and binary columns the plan reads only through their value lengths:
    /// `length(c)`, `c = ''`, `c <> ''` (ascending). The scan reads their lengths instead of
    /// their values where the table's source can ([`Table::morsel_sizes`]), as ClickHouse
    /// reads a String's `.size` subcolumn: `AVG(length(URL)) .. WHERE URL <> ''` (Q28)
    /// decodes no URL.
    pub fn sized_columns(&self) -> Vec<usize> {
        let (mut full, mut sized) = (Vec::new(), Vec::new());
        let (table, filter) = match self {
            Plan::Aggregate(p) => {
                for e in p.keys.iter().chain(p.aggs.iter().filter_map(|a| a.input.as_ref())) {
                    match e {
                        ScalarExpr::Computed(i) => p.computed[*i].columns_sized(&mut full, &mut sized),
                        e => full.push(e.column()),
                    }
                }
                (&p.table, &p.filter)
            }
            Plan::Scan(p) => {
                for (_, e) in &p.output {
                    match e {
                        ScalarExpr::Computed(i) => p.computed[*i].columns_sized(&mut full, &mut sized),
                        e => full.push(e.column()),
                    }
                }
                (&p.table, &p.filter)
            }
        };
        if let Some(f) = filter {
            predicate_columns_sized(f, &mut full, &mut sized);
        }
        sized.sort_unstable();
        sized.dedup();
        sized.retain(|c| {
            !full.contains(c)
                && matches!(table.schema().fields().get(*c).map(|f| f.data_type()), Some(DataType::Utf8 | DataType::Binary))
        });
        sized
    }

    /// The columns the WHERE clause reads (ascending, no repeats): what PREWHERE reads
    /// first.
    pub fn filter_columns(&self) -> Vec<usize> {
        let filter = match self {
            Plan::Aggregate(p) => &p.filter,
            Plan::Scan(p) => &p.filter,
        };
        let mut cols = Vec::new();
        if let Some(f) = filter {
            predicate_columns(f, &mut cols);
        }
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// The table the plan reads.
    pub fn table(&self) -> &Arc<Table> {
        match self {
            Plan::Aggregate(p) => &p.table,
            Plan::Scan(p) => &p.table,
        }
    }
}

/// As [`predicate_columns`], with the columns read only through their lengths (compared
/// with `''` by `=` or `<>`, or `length(c)` in an expression) in `sized` instead of `full`.
fn predicate_columns_sized(p: &Predicate, full: &mut Vec<usize>, sized: &mut Vec<usize>) {
    match p {
        Predicate::Cmp { column, op: CmpOp::Eq | CmpOp::NotEq, value: Value::Bytes(b) } if b.is_empty() => sized.push(*column),
        Predicate::Cmp { column, .. } | Predicate::Like { column, .. } => full.push(*column),
        Predicate::CmpColumns { left, right, .. } => full.extend([*left, *right]),
        Predicate::And(v) | Predicate::Or(v) => v.iter().for_each(|q| predicate_columns_sized(q, full, sized)),
        Predicate::Not(q) => predicate_columns_sized(q, full, sized),
        Predicate::Const(_) => {}
        Predicate::Expr(e) => e.columns_sized(full, sized),
    }
}

pub(crate) fn predicate_columns(p: &Predicate, out: &mut Vec<usize>) {
    let mut sized = Vec::new();
    predicate_columns_sized(p, out, &mut sized);
    out.append(&mut sized);
}

#[cfg(test)]
mod like_tests {
    use super::LikePattern::{self, *};

    #[test]
    fn like_pattern_shapes() {
        let p = |s: &str| LikePattern::parse(s);
        assert_eq!(p("%google%"), Some(Contains(b"google".to_vec())));
        assert_eq!(p("%%google%%"), Some(Contains(b"google".to_vec())));
        assert_eq!(p("http://%"), Some(Prefix(b"http://".to_vec())));
        assert_eq!(p("%.html"), Some(Suffix(b".html".to_vec())));
        assert_eq!(p("abc"), Some(Exact(b"abc".to_vec())));
        assert_eq!(p(""), Some(Exact(vec![])));
        assert_eq!(p("%"), Some(Contains(vec![])));
        assert_eq!(p(r"%50\%%"), Some(Contains(b"50%".to_vec())));
        assert_eq!(p(r"a\_b%"), Some(Prefix(b"a_b".to_vec())));
        assert_eq!(p("a%b"), None);
        assert_eq!(p("%a_b%"), None);
        assert_eq!(p("_x"), None);
    }
}
