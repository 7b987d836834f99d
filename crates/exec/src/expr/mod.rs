//! Scalar expressions: a typed tree (columns, literals, arithmetic, comparisons, boolean
//! logic, `IN`, `CASE`, `IS [NOT] NULL`, `CAST`, `LIKE`, functions) built and type-checked
//! by its constructors at plan time, and a vectorized evaluator over one morsel built on
//! Arrow's compute kernels (`numeric`, `cmp`, `boolean`, `zip`, `like`, `length`, `cast`).
//!
//! Types follow ClickHouse, widened to 64 bits:
//!
//! | expression                  | result type                                                 |
//! |-----------------------------|-------------------------------------------------------------|
//! | `a + b`, `a * b`, `a % b`, `intDiv(a, b)` (integers) | `UInt64` if both are unsigned, else `Int64`; wraps on overflow |
//! | `a - b` (integers)          | `Int64` (wraps)                                             |
//! | any of them with a float    | `Float64`                                                   |
//! | `a / b`                     | `Float64` always (`1 / 0` is `inf`, `0 / 0` is NaN, as ClickHouse) |
//! | `intDiv(a, 0)`, `a % 0` (integers) | [`Error::InvalidArgument`] "division by zero" (ClickHouse `ILLEGAL_DIVISION`) |
//! | comparisons, `AND`/`OR`/`NOT`, `IN`, `LIKE`, `IS NULL`, `match` | `Boolean` (three-valued: NULL is UNKNOWN) |
//! | `length(s)`                 | `UInt64`, bytes (ClickHouse; DuckDB counts characters)      |
//! | `toStartOfMinute/Hour/Day(t)`, `DATE_TRUNC(unit, t)` | `Timestamp(Second)` (units `second`, `minute`, `hour`, `day`) |
//! | `toMinute/toHour/toSecond(t)`, `extract(.. FROM t)` | `UInt8`                          |
//!
//! Integer literals are `UInt64` when non-negative, else `Int64`; a literal compared with a
//! column is compared in the column's type when it fits. Every operator propagates NULL
//! (an input NULL gives a NULL output), except `AND`/`OR` (Kleene logic), `IS [NOT] NULL`,
//! `CASE` (a NULL condition is not TRUE) and `coalesce`. Floats compare in Tessera's float
//! order (`tessera_common::float`: `-0.0 = 0.0`, NaN equal to NaN and above `+inf`).
//!
//! Every argument of a `CASE`, `if` or `coalesce` is evaluated on every row of the morsel,
//! so an integer division by zero in a branch that is not taken still fails, and the
//! expressions of GROUP BY keys are evaluated before WHERE filters rows.

use std::sync::Arc;

use arrow::array::*;
use arrow::compute::kernels::{boolean, cmp, comparison, numeric};
use arrow::compute::{CastOptions, can_cast_types, cast_with_options, prep_null_mask_filter};
use arrow::datatypes::*;
use arrow::error::ArrowError;
use tessera_common::float::canonical_array;
use tessera_common::{Error, Result};
use tessera_kernels::CmpOp;

/// A constant.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `NULL` (type `Null`, taking the type of its context).
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A negative integer (`Int64`).
    Int(i64),
    /// A non-negative integer (`UInt64`).
    UInt(u64),
    /// A floating-point number (`Float64`).
    Float(f64),
    /// A string (`Utf8`).
    Str(String),
    /// A date, days since 1970-01-01 (`Date32`).
    Date(i32),
    /// A timestamp, seconds since 1970-01-01 00:00:00 UTC (`Timestamp(Second)`).
    Timestamp(i64),
}

impl Literal {
    /// The Arrow type of the constant.
    pub fn data_type(&self) -> DataType {
        match self {
            Literal::Null => DataType::Null,
            Literal::Bool(_) => DataType::Boolean,
            Literal::Int(_) => DataType::Int64,
            Literal::UInt(_) => DataType::UInt64,
            Literal::Float(_) => DataType::Float64,
            Literal::Str(_) => DataType::Utf8,
            Literal::Date(_) => DataType::Date32,
            Literal::Timestamp(_) => DataType::Timestamp(TimeUnit::Second, None),
        }
    }

    /// The constant as an array of one row.
    pub fn to_array(&self) -> ArrayRef {
        match self {
            Literal::Null => new_null_array(&DataType::Null, 1),
            Literal::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
            Literal::Int(i) => Arc::new(Int64Array::from(vec![*i])),
            Literal::UInt(u) => Arc::new(UInt64Array::from(vec![*u])),
            Literal::Float(f) => Arc::new(Float64Array::from(vec![*f])),
            Literal::Str(s) => Arc::new(StringArray::from(vec![s.as_str()])),
            Literal::Date(d) => Arc::new(Date32Array::from(vec![*d])),
            Literal::Timestamp(t) => Arc::new(TimestampSecondArray::from(vec![*t])),
        }
    }
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (always `Float64`).
    Div,
    /// `intDiv(a, b)`: integer division truncating toward zero.
    IntDiv,
    /// `%`: remainder with the sign of the dividend (C, ClickHouse).
    Rem,
}

/// Units of `DATE_TRUNC` / `toStartOf*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TruncUnit {
    /// Whole seconds (the identity on `Timestamp(Second)`).
    Second,
    /// `toStartOfMinute`.
    Minute,
    /// `toStartOfHour`.
    Hour,
    /// `toStartOfDay`.
    Day,
    /// The Monday starting the week (`DATE_TRUNC('week', t)`, `toMonday`, ISO 8601 weeks).
    Week,
    /// The Sunday starting the week (`toStartOfWeek(t)`, ClickHouse's default mode 0).
    WeekFromSunday,
    /// `toStartOfMonth`.
    Month,
    /// `toStartOfQuarter`: January, April, July or October 1.
    Quarter,
    /// `toStartOfYear`.
    Year,
}

impl TruncUnit {
    /// The unit's length when it is a fixed number of seconds (not a calendar unit).
    pub(crate) fn seconds(self) -> Option<i64> {
        match self {
            TruncUnit::Second => Some(1),
            TruncUnit::Minute => Some(60),
            TruncUnit::Hour => Some(3600),
            TruncUnit::Day => Some(86_400),
            TruncUnit::Week | TruncUnit::WeekFromSunday | TruncUnit::Month | TruncUnit::Quarter | TruncUnit::Year => None,
        }
    }

    /// The unit by its SQL name (`DATE_TRUNC`'s first argument, case-insensitive).
    fn parse(name: &str) -> Option<TruncUnit> {
        Some(match name.to_ascii_lowercase().as_str() {
            "second" => TruncUnit::Second,
            "minute" => TruncUnit::Minute,
            "hour" => TruncUnit::Hour,
            "day" => TruncUnit::Day,
            "week" => TruncUnit::Week,
            "month" => TruncUnit::Month,
            "quarter" => TruncUnit::Quarter,
            "year" => TruncUnit::Year,
            _ => return None,
        })
    }
}

/// Units of `INTERVAL n unit` and of ClickHouse's `addDays`, `subtractMonths`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntervalUnit {
    /// Seconds.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// A day (86,400 seconds: UTC has no daylight saving).
    Day,
    /// 7 days.
    Week,
    /// A calendar month: the day of the month is kept, or clipped to the last day of a
    /// shorter month (January 31 + 1 month = February 28 or 29), as ClickHouse and DuckDB do.
    Month,
    /// 3 months.
    Quarter,
    /// 12 months.
    Year,
}

impl IntervalUnit {
    /// The unit by its SQL name, singular or plural, case-insensitive (`day`, `DAYS`).
    pub fn parse(name: &str) -> Option<IntervalUnit> {
        let n = name.to_ascii_lowercase();
        Some(match n.strip_suffix('s').unwrap_or(&n) {
            "second" => IntervalUnit::Second,
            "minute" => IntervalUnit::Minute,
            "hour" => IntervalUnit::Hour,
            "day" => IntervalUnit::Day,
            "week" => IntervalUnit::Week,
            "month" => IntervalUnit::Month,
            "quarter" => IntervalUnit::Quarter,
            "year" => IntervalUnit::Year,
            _ => return None,
        })
    }

    /// (seconds, months) in one unit: exactly one of them is non-zero.
    fn size(self) -> (i64, i64) {
        match self {
            IntervalUnit::Second => (1, 0),
            IntervalUnit::Minute => (60, 0),
            IntervalUnit::Hour => (3600, 0),
            IntervalUnit::Day => (86_400, 0),
            IntervalUnit::Week => (7 * 86_400, 0),
            IntervalUnit::Month => (0, 1),
            IntervalUnit::Quarter => (0, 3),
            IntervalUnit::Year => (0, 12),
        }
    }
}

/// Parts of a timestamp (`extract(part FROM t)`, `toMinute(t)`, ...), UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DatePart {
    /// 0..59.
    Second,
    /// 0..59.
    Minute,
    /// 0..23.
    Hour,
    /// Day of the month, 1..31 (`toDayOfMonth`).
    Day,
    /// 1..12 (`toMonth`).
    Month,
    /// The year, as `UInt16` (`toYear`).
    Year,
    /// 1..4 (`toQuarter`).
    Quarter,
    /// Monday 1 .. Sunday 7 (`toDayOfWeek`, ISO 8601; `extract(isodow ..)`).
    DayOfWeek,
    /// 1..366, as `UInt16` (`toDayOfYear`).
    DayOfYear,
    /// The ISO 8601 week number, 1..53 (`toISOWeek`, `extract(week ..)`): weeks start on
    /// Monday and week 1 holds the year's first Thursday.
    IsoWeek,
}

impl DatePart {
    /// The part's type, as ClickHouse's `toYear` and `toDayOfYear` (`UInt16`) and the
    /// others (`UInt8`).
    pub fn data_type(self) -> DataType {
        if matches!(self, DatePart::Year | DatePart::DayOfYear) { DataType::UInt16 } else { DataType::UInt8 }
    }
}

/// Scalar functions.
#[derive(Debug, Clone, PartialEq)]
pub enum Func {
    /// `length(s)`: bytes.
    Length,
    /// `lower(s)`: ASCII letters to lower case (ClickHouse `lower`).
    Lower,
    /// `upper(s)`: ASCII letters to upper case.
    Upper,
    /// `concat(s, ..)`.
    Concat,
    /// `substring(s, offset[, length])` (`substr`, `mid`, `SUBSTRING(s FROM o FOR n)`),
    /// ClickHouse's rules: `offset` counts from 1, from the end when negative, and 0 gives
    /// an empty string; a negative `length` leaves that many units off the end; the span is
    /// clipped to the value. Units: bytes of a binary value, characters of a UTF-8 string
    /// (ClickHouse's `substringUTF8`; the same as bytes for ASCII), so a result is always
    /// valid UTF-8.
    Substring {
        /// 1-based start (negative: from the end).
        offset: i64,
        /// Units to take (negative: units to leave off the end); `None`: to the end.
        length: Option<i64>,
    },
    /// `REGEXP_REPLACE(s, pattern, replacement)` (ClickHouse `replaceRegexpAll`: every
    /// match), or `replaceRegexpOne` (`all = false`: the first match). `\0`..`\9` in the
    /// replacement insert capture groups, `\\` a backslash.
    RegexpReplace {
        /// The pattern.
        pattern: Pattern,
        /// The replacement.
        replacement: Replacement,
        /// Replace every match (else the first).
        all: bool,
    },
    /// `match(s, pattern)`: whether the pattern matches anywhere in `s`.
    Match(Pattern),
    /// `DATE_TRUNC(unit, t)`, `toStartOfMinute(t)`, ...
    Trunc(TruncUnit),
    /// `toMinute(t)`, `extract(minute FROM t)`, ...
    Part(DatePart),
    /// `toDate(t)`: the day of a timestamp.
    ToDate,
    /// A timestamp moved by a number of calendar months ([`IntervalUnit::Month`]'s rule),
    /// keeping its time of day.
    AddMonths(i64),
    /// `coalesce(a, b, ..)`: the first non-NULL argument.
    Coalesce,
}

/// A typed scalar expression over the columns of one table (or over the output columns of
/// an aggregation, for HAVING). Build it with the constructors, which check types.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Column `index` of the input, of type `dtype`.
    Column {
        /// Column index.
        index: usize,
        /// Its type.
        dtype: DataType,
    },
    /// A constant.
    Literal(Literal),
    /// Arithmetic; both operands are cast to `dtype` first.
    Arith {
        /// Operator.
        op: ArithOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Operand and result type.
        dtype: DataType,
    },
    /// A comparison in the operands' common type `common`.
    Cmp {
        /// Operator.
        op: CmpOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Type both sides are cast to.
        common: DataType,
    },
    /// Kleene AND of booleans.
    And(Vec<Expr>),
    /// Kleene OR of booleans.
    Or(Vec<Expr>),
    /// NOT.
    Not(Box<Expr>),
    /// `IS NULL` (`IS NOT NULL` when `negated`).
    IsNull {
        /// Operand.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `CASE WHEN c1 THEN v1 .. ELSE e END`: the first branch whose condition is TRUE.
    Case {
        /// (condition, value) pairs.
        branches: Vec<(Expr, Expr)>,
        /// The value when no condition is TRUE (`NULL` without ELSE).
        otherwise: Box<Expr>,
        /// Result type (every value is cast to it).
        dtype: DataType,
    },
    /// `CAST(e AS t)`, `e::t`: Arrow's cast; a value that does not fit is an error.
    Cast {
        /// Operand.
        expr: Box<Expr>,
        /// Target type.
        to: DataType,
    },
    /// `[NOT] [I]LIKE pattern` with every pattern shape (`%`, `_`, `\` escapes).
    Like {
        /// The string operand (`Utf8`).
        expr: Box<Expr>,
        /// The pattern.
        pattern: String,
        /// `NOT LIKE`.
        negated: bool,
        /// `ILIKE`.
        case_insensitive: bool,
    },
    /// A function call.
    Func {
        /// The function.
        func: Func,
        /// Arguments (constant arguments such as a regex are folded into `func`).
        args: Vec<Expr>,
        /// Result type.
        dtype: DataType,
    },
}

fn is_int(t: &DataType) -> bool {
    t.is_integer()
}

fn is_signed(t: &DataType) -> bool {
    matches!(t, DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64)
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::Binary)
}

fn is_numeric(t: &DataType) -> bool {
    is_int(t) || is_float(t) || *t == DataType::Null
}

fn is_bool(t: &DataType) -> bool {
    matches!(t, DataType::Boolean | DataType::Null)
}

/// The unit of ClickHouse's `addUNITs` / `subtractUNITs` (lower-case `name`), if it is one.
fn interval_function(name: &str) -> Option<IntervalUnit> {
    name.strip_prefix("add").or_else(|| name.strip_prefix("subtract")).and_then(IntervalUnit::parse)
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Second, None)
}

/// The type two values are brought to for comparison, CASE or coalesce.
fn common_type(a: &DataType, b: &DataType, exact_ints: bool) -> Option<DataType> {
    use DataType::*;
    if a == b {
        return Some(a.clone());
    }
    Some(match (a, b) {
        (Null, t) | (t, Null) => t.clone(),
        (x, y) if is_int(x) && is_int(y) => match (is_signed(x), is_signed(y)) {
            (true, true) => Int64,
            (false, false) => UInt64,
            // Every Int64 and UInt64 value, exactly.
            _ if exact_ints => Decimal128(20, 0),
            _ => Int64,
        },
        (x, y) if is_numeric(x) && is_numeric(y) => Float64,
        (Utf8, Binary) | (Binary, Utf8) => Binary,
        (Date32, Timestamp(_, _)) | (Timestamp(_, _), Date32) => timestamp(),
        _ => return None,
    })
}

/// Whether literal `l` converts to `to` without loss.
fn literal_fits(l: &Literal, to: &DataType) -> bool {
    if matches!(l, Literal::Null) {
        return true;
    }
    let from = l.data_type();
    let same_kind = (is_numeric(&from) && is_numeric(to))
        || (is_string(&from) && is_string(to))
        || (from == DataType::Boolean && *to == DataType::Boolean)
        || (from.is_temporal() && to.is_temporal());
    if !same_kind || (is_float(&from) && !is_float(to)) {
        return false;
    }
    let opts = CastOptions { safe: false, ..Default::default() };
    can_cast_types(&l.data_type(), to) && cast_with_options(&l.to_array(), to, &opts).is_ok()
}

fn name_of(t: &DataType) -> String {
    t.to_string()
}

impl Expr {
    /// Column `index` of type `dtype`.
    pub fn column(index: usize, dtype: DataType) -> Expr {
        Expr::Column { index, dtype }
    }

    /// A constant.
    pub fn literal(l: Literal) -> Expr {
        Expr::Literal(l)
    }

    /// The type of the values the expression yields.
    pub fn data_type(&self) -> DataType {
        match self {
            Expr::Column { dtype, .. } | Expr::Arith { dtype, .. } | Expr::Case { dtype, .. } | Expr::Func { dtype, .. } => {
                dtype.clone()
            }
            Expr::Literal(l) => l.data_type(),
            Expr::Cast { to, .. } => to.clone(),
            Expr::Cmp { .. } | Expr::And(_) | Expr::Or(_) | Expr::Not(_) | Expr::IsNull { .. } | Expr::Like { .. } => {
                DataType::Boolean
            }
        }
    }

    /// Whether a NULL constant occurs in the expression (the only way it yields NULL from
    /// non-NULL inputs: CASE without ELSE has a NULL ELSE).
    pub fn has_null_literal(&self) -> bool {
        match self {
            Expr::Literal(l) => *l == Literal::Null,
            Expr::Column { .. } => false,
            Expr::Arith { left, right, .. } | Expr::Cmp { left, right, .. } => left.has_null_literal() || right.has_null_literal(),
            Expr::And(v) | Expr::Or(v) => v.iter().any(Expr::has_null_literal),
            Expr::Not(e) | Expr::IsNull { expr: e, .. } | Expr::Cast { expr: e, .. } | Expr::Like { expr: e, .. } => {
                e.has_null_literal()
            }
            Expr::Case { branches, otherwise, .. } => {
                otherwise.has_null_literal() || branches.iter().any(|(c, v)| c.has_null_literal() || v.has_null_literal())
            }
            Expr::Func { args, .. } => args.iter().any(Expr::has_null_literal),
        }
    }

    /// Appends the column indices the expression reads to `out` (with repeats).
    pub fn columns(&self, out: &mut Vec<usize>) {
        let mut sized = Vec::new();
        self.columns_sized(out, &mut sized);
        out.append(&mut sized);
    }

    /// As [`Expr::columns`], with the columns read only through `length(column)` in
    /// `sized` instead of `full` (a column may end up in both).
    pub fn columns_sized(&self, full: &mut Vec<usize>, sized: &mut Vec<usize>) {
        match self {
            Expr::Func { func: Func::Length, args, .. } if matches!(args.as_slice(), [Expr::Column { .. }]) => {
                args.iter().for_each(|a| a.columns(sized))
            }
            Expr::Column { index, .. } => full.push(*index),
            Expr::Literal(_) => {}
            Expr::Arith { left, right, .. } | Expr::Cmp { left, right, .. } => {
                left.columns_sized(full, sized);
                right.columns_sized(full, sized);
            }
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.columns_sized(full, sized)),
            Expr::Not(e) | Expr::IsNull { expr: e, .. } | Expr::Cast { expr: e, .. } | Expr::Like { expr: e, .. } => {
                e.columns_sized(full, sized)
            }
            Expr::Case { branches, otherwise, .. } => {
                for (c, v) in branches {
                    c.columns_sized(full, sized);
                    v.columns_sized(full, sized);
                }
                otherwise.columns_sized(full, sized);
            }
            Expr::Func { args, .. } => args.iter().for_each(|e| e.columns_sized(full, sized)),
        }
    }

    /// The same expression reading column `f(i)` where this one reads column `i` (of the same
    /// type).
    pub fn map_columns(&self, f: &dyn Fn(usize) -> usize) -> Expr {
        let b = |e: &Expr| Box::new(e.map_columns(f));
        match self {
            Expr::Column { index, dtype } => Expr::Column { index: f(*index), dtype: dtype.clone() },
            Expr::Literal(l) => Expr::Literal(l.clone()),
            Expr::Arith { op, left, right, dtype } => Expr::Arith { op: *op, left: b(left), right: b(right), dtype: dtype.clone() },
            Expr::Cmp { op, left, right, common } => Expr::Cmp { op: *op, left: b(left), right: b(right), common: common.clone() },
            Expr::And(v) => Expr::And(v.iter().map(|e| e.map_columns(f)).collect()),
            Expr::Or(v) => Expr::Or(v.iter().map(|e| e.map_columns(f)).collect()),
            Expr::Not(e) => Expr::Not(b(e)),
            Expr::IsNull { expr, negated } => Expr::IsNull { expr: b(expr), negated: *negated },
            Expr::Case { branches, otherwise, dtype } => Expr::Case {
                branches: branches.iter().map(|(c, v)| (c.map_columns(f), v.map_columns(f))).collect(),
                otherwise: b(otherwise),
                dtype: dtype.clone(),
            },
            Expr::Cast { expr, to } => Expr::Cast { expr: b(expr), to: to.clone() },
            Expr::Like { expr, pattern, negated, case_insensitive } => Expr::Like {
                expr: b(expr),
                pattern: pattern.clone(),
                negated: *negated,
                case_insensitive: *case_insensitive,
            },
            Expr::Func { func, args, dtype } => Expr::Func {
                func: func.clone(),
                args: args.iter().map(|e| e.map_columns(f)).collect(),
                dtype: dtype.clone(),
            },
        }
    }

    /// `left op right` with the result types of the module table.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] unless both operands are numbers (`intDiv` and `%` of floats:
    /// `%` is `fmod`, `intDiv` needs integers).
    pub fn arith(op: ArithOp, left: Expr, right: Expr) -> Result<Expr> {
        let (l, r) = (left.data_type(), right.data_type());
        if let Some(e) = Self::date_arith(op, &left, &right)? {
            return Ok(e);
        }
        if !is_numeric(&l) || !is_numeric(&r) {
            return Err(Error::TypeMismatch(format!(
                "arithmetic {op:?} needs numbers, got {} and {}",
                name_of(&l),
                name_of(&r)
            )));
        }
        let any_float = is_float(&l) || is_float(&r);
        let dtype = match op {
            ArithOp::Div => DataType::Float64,
            ArithOp::IntDiv if any_float => {
                return Err(Error::TypeMismatch(format!("intDiv needs integers, got {l} and {r}")));
            }
            _ if any_float => DataType::Float64,
            ArithOp::Sub => DataType::Int64,
            _ if !is_signed(&l) && !is_signed(&r) => DataType::UInt64,
            _ => DataType::Int64,
        };
        Ok(Expr::Arith { op, left: Box::new(left), right: Box::new(right), dtype })
    }

    /// The value of an integer (or NULL) expression that reads no column, evaluated once:
    /// `Some(None)` for NULL, `None` for an expression of another type or over columns.
    ///
    /// # Errors
    /// Errors of evaluating it (an overflow).
    pub fn constant_int(&self) -> Result<Option<Option<i64>>> {
        let t = self.data_type();
        let mut cols = Vec::new();
        self.columns(&mut cols);
        if !cols.is_empty() || !(t.is_integer() || t == DataType::Null) {
            return Ok(None);
        }
        let v = evaluate(&Expr::cast(self.clone(), DataType::Int64)?, &[], 1)?;
        let v = v.as_primitive::<Int64Type>();
        Ok(Some(v.is_valid(0).then(|| v.value(0))))
    }

    /// `t + INTERVAL n unit` (`n` negative: minus), as ClickHouse: a timestamp stays a
    /// timestamp; a date stays a date for whole days, weeks, months, quarters and years and
    /// becomes a timestamp (its midnight, UTC) for hours, minutes and seconds. Months follow
    /// [`IntervalUnit::Month`]'s rule. NULL gives NULL.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] when `t` is not a date or timestamp; [`Error::InvalidArgument`]
    /// when `n` units of seconds overflow `Int64`.
    pub fn add_interval(t: Expr, n: i64, unit: IntervalUnit) -> Result<Expr> {
        let dtype = t.data_type();
        if dtype == DataType::Null {
            return Ok(Expr::Literal(Literal::Null));
        }
        if !matches!(dtype, DataType::Date32 | DataType::Timestamp(TimeUnit::Second, None)) {
            return Err(Error::TypeMismatch(format!(
                "an interval is added to a date or timestamp, got {}",
                name_of(&dtype)
            )));
        }
        let int = |v: i64| Expr::literal(if v < 0 { Literal::Int(v) } else { Literal::UInt(v as u64) });
        match unit.size() {
            (secs, 0) => {
                let total = n
                    .checked_mul(secs)
                    .ok_or_else(|| Error::InvalidArgument(format!("INTERVAL {n} {unit:?}: the number of seconds overflows Int64")))?;
                if dtype == DataType::Date32 && secs % 86_400 == 0 {
                    Expr::arith(ArithOp::Add, t, int(total / 86_400))
                } else {
                    Expr::arith(ArithOp::Add, Expr::cast(t, timestamp())?, int(total))
                }
            }
            (_, months) => {
                let m = n
                    .checked_mul(months)
                    .ok_or_else(|| Error::InvalidArgument(format!("INTERVAL {n} {unit:?}: the number of months overflows Int64")))?;
                let shifted =
                    Expr::Func { func: Func::AddMonths(m), args: vec![Expr::cast(t, timestamp())?], dtype: timestamp() };
                if dtype == DataType::Date32 {
                    Ok(Expr::Func { func: Func::ToDate, args: vec![shifted], dtype: DataType::Date32 })
                } else {
                    Ok(shifted)
                }
            }
        }
    }

    /// Date and time arithmetic, as ClickHouse: `date + n`, `n + date`, `date - n` move a
    /// date by `n` days and a timestamp by `n` seconds (same type as the date; integer `n`),
    /// `a - b` of two dates or of two timestamps is their distance in days or seconds
    /// (`Int64`). Planned as integer arithmetic on the value's days or seconds. `None` when
    /// neither side is a date or timestamp.
    fn date_arith(op: ArithOp, left: &Expr, right: &Expr) -> Result<Option<Expr>> {
        let (l, r) = (left.data_type(), right.data_type());
        let temporal = |t: &DataType| matches!(t, DataType::Date32 | DataType::Timestamp(TimeUnit::Second, None));
        if !temporal(&l) && !temporal(&r) {
            return Ok(None);
        }
        let units = |e: &Expr| Expr::cast(e.clone(), DataType::Int64);
        let back = |e: Expr, t: &DataType| -> Result<Expr> {
            // Days are Int32 in a Date32 (wrapping as ClickHouse's date arithmetic does).
            if *t == DataType::Date32 { Expr::cast(Expr::cast(e, DataType::Int32)?, DataType::Date32) } else { Expr::cast(e, t.clone()) }
        };
        let bad = || {
            Error::TypeMismatch(format!("arithmetic {op:?} of {} and {}: a date or timestamp takes an integer number of days or seconds, or (for -) one of its own type", name_of(&l), name_of(&r)))
        };
        // An integer number of units, or NULL (the answer is then NULL).
        let units_of = |t: &DataType| t.is_integer() || *t == DataType::Null;
        let e = match (op, temporal(&l), temporal(&r)) {
            (ArithOp::Add | ArithOp::Sub, true, false) if units_of(&r) => back(Expr::arith(op, units(left)?, right.clone())?, &l)?,
            (ArithOp::Add, false, true) if units_of(&l) => back(Expr::arith(op, left.clone(), units(right)?)?, &r)?,
            (ArithOp::Sub, true, true) if l == r => Expr::arith(op, units(left)?, units(right)?)?,
            _ => return Err(bad()),
        };
        Ok(Some(e))
    }

    /// `left op right`, compared in a common type (a literal takes the other side's type
    /// when it fits).
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for types without a common type (a string and a number).
    pub fn compare(op: CmpOp, left: Expr, right: Expr) -> Result<Expr> {
        let (l, r) = (left.data_type(), right.data_type());
        let common = match (&left, &right) {
            (_, Expr::Literal(lit)) if l != DataType::Null && literal_fits(lit, &l) => l.clone(),
            (Expr::Literal(lit), _) if r != DataType::Null && literal_fits(lit, &r) => r.clone(),
            _ => common_type(&l, &r, true).ok_or_else(|| {
                Error::TypeMismatch(format!("cannot compare {} with {}", name_of(&l), name_of(&r)))
            })?,
        };
        if common == DataType::Boolean && !(is_bool(&l) && is_bool(&r)) {
            return Err(Error::TypeMismatch(format!("cannot compare {l} with {r}")));
        }
        Ok(Expr::Cmp { op, left: Box::new(left), right: Box::new(right), common })
    }

    fn check_bool(e: &Expr, what: &str) -> Result<()> {
        let t = e.data_type();
        if is_bool(&t) {
            Ok(())
        } else {
            Err(Error::TypeMismatch(format!("{what} needs a boolean operand, got {t}")))
        }
    }

    /// Kleene AND of boolean terms.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for a non-boolean term.
    pub fn and(terms: Vec<Expr>) -> Result<Expr> {
        terms.iter().try_for_each(|t| Expr::check_bool(t, "AND"))?;
        Ok(Expr::And(terms))
    }

    /// Kleene OR of boolean terms.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for a non-boolean term.
    pub fn or(terms: Vec<Expr>) -> Result<Expr> {
        terms.iter().try_for_each(|t| Expr::check_bool(t, "OR"))?;
        Ok(Expr::Or(terms))
    }

    /// NOT of a boolean.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for a non-boolean operand.
    #[allow(clippy::should_implement_trait)] // reason: a constructor that can fail, not `ops::Not`
    pub fn not(e: Expr) -> Result<Expr> {
        Expr::check_bool(&e, "NOT")?;
        Ok(Expr::Not(Box::new(e)))
    }

    /// `e IS [NOT] NULL`.
    pub fn is_null(e: Expr, negated: bool) -> Expr {
        Expr::IsNull { expr: Box::new(e), negated }
    }

    /// `e [NOT] IN (list)`: an OR of equalities (so `x IN (1, NULL)` is TRUE or UNKNOWN,
    /// as in SQL).
    ///
    /// # Errors
    /// As [`Expr::compare`].
    pub fn in_list(e: Expr, list: Vec<Expr>, negated: bool) -> Result<Expr> {
        let terms = list.into_iter().map(|v| Expr::compare(CmpOp::Eq, e.clone(), v)).collect::<Result<Vec<_>>>()?;
        let any = Expr::Or(terms);
        Ok(if negated { Expr::Not(Box::new(any)) } else { any })
    }

    /// `CASE WHEN c THEN v .. ELSE otherwise END` (`otherwise` = NULL without ELSE).
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for a non-boolean condition or values without a common type.
    pub fn case(branches: Vec<(Expr, Expr)>, otherwise: Option<Expr>) -> Result<Expr> {
        let otherwise = otherwise.unwrap_or(Expr::Literal(Literal::Null));
        let mut dtype = otherwise.data_type();
        for (c, v) in &branches {
            Expr::check_bool(c, "CASE WHEN")?;
            let t = v.data_type();
            dtype = common_type(&dtype, &t, false)
                .ok_or_else(|| Error::TypeMismatch(format!("CASE values of types {dtype} and {t}")))?;
        }
        Ok(Expr::Case { branches, otherwise: Box::new(otherwise), dtype })
    }

    /// `CAST(e AS to)`.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] when Arrow cannot cast between the types.
    pub fn cast(e: Expr, to: DataType) -> Result<Expr> {
        let from = e.data_type();
        if from == to {
            return Ok(e);
        }
        if !can_cast_types(&from, &to) {
            return Err(Error::TypeMismatch(format!("cannot cast {from} to {to}")));
        }
        Ok(Expr::Cast { expr: Box::new(e), to })
    }

    /// `e [NOT] [I]LIKE pattern`.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] unless `e` is a `Utf8` string; [`Error::Parse`] for a pattern
    /// ending in a lone `\`.
    pub fn like(e: Expr, pattern: String, negated: bool, case_insensitive: bool) -> Result<Expr> {
        let t = e.data_type();
        if !matches!(t, DataType::Utf8 | DataType::Null) {
            return Err(Error::TypeMismatch(format!("LIKE needs a string, got {t}")));
        }
        if pattern.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1 {
            return Err(Error::Parse(format!("LIKE pattern '{pattern}' ends with an escape character (\\)")));
        }
        Ok(Expr::Like { expr: Box::new(e), pattern, negated, case_insensitive })
    }

    /// A function call by (case-insensitive) name: `length`, `lower`, `upper`, `concat`,
    /// `substring` / `substr` / `mid` / `substringUTF8`,
    /// `regexp_replace` / `replaceRegexpAll`, `replaceRegexpOne`, `match`, `date_trunc`,
    /// `toStartOfMinute` / `Hour` / `Day`, `toMinute` / `minute`, `toHour` / `hour`,
    /// `toSecond` / `second`, `toDayOfMonth` / `day`, `toMonth` / `month`, `toYear` / `year`,
    /// `toQuarter`, `toDayOfWeek` (Monday 1), `toDayOfYear`, `toISOWeek`, `toStartOfWeek`
    /// (mode 0: Sunday; odd modes: Monday), `toMonday`, `toStartOfMonth` / `Quarter` / `Year`,
    /// `addSeconds` .. `addYears` and `subtractSeconds` .. `subtractYears` (constant counts),
    /// `toDate`, `toDateTime`, `coalesce`, `if`, `intDiv`.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] for an unknown function; [`Error::Plan`] for a wrong number
    /// of arguments or a non-constant argument that must be constant (pattern, unit);
    /// [`Error::TypeMismatch`] for wrong argument types; [`Error::InvalidArgument`] for an
    /// invalid regex or unit, or a replacement naming a group the pattern does not have.
    pub fn function(name: &str, mut args: Vec<Expr>) -> Result<Expr> {
        let lower = name.to_ascii_lowercase();
        let arity = |n: usize, args: &[Expr]| -> Result<()> {
            if args.len() == n {
                Ok(())
            } else {
                Err(Error::plan(format!("{name} takes {n} argument(s), got {}", args.len())))
            }
        };
        let string_arg = |e: &Expr| -> Result<()> {
            let t = e.data_type();
            if is_string(&t) || t == DataType::Null {
                Ok(())
            } else {
                Err(Error::TypeMismatch(format!("{name} needs a string, got {t}")))
            }
        };
        let const_str = |e: &Expr, what: &str| -> Result<String> {
            match e {
                Expr::Literal(Literal::Str(s)) => Ok(s.clone()),
                _ => Err(Error::plan(format!("{name}: the {what} must be a constant string"))),
            }
        };
        let time_arg = |e: Expr| -> Result<Expr> {
            match e.data_type() {
                DataType::Timestamp(_, _) | DataType::Null => Ok(e),
                DataType::Date32 => Expr::cast(e, timestamp()),
                t => Err(Error::TypeMismatch(format!("{name} needs a date or timestamp, got {t}"))),
            }
        };
        let func = |func: Func, args: Vec<Expr>, dtype: DataType| Ok(Expr::Func { func, args, dtype });
        match lower.as_str() {
            "length" | "octet_length" => {
                arity(1, &args)?;
                string_arg(&args[0])?;
                func(Func::Length, args, DataType::UInt64)
            }
            "lower" | "lcase" | "upper" | "ucase" => {
                arity(1, &args)?;
                if !matches!(args[0].data_type(), DataType::Utf8 | DataType::Null) {
                    return Err(Error::TypeMismatch(format!("{name} needs a string, got {}", args[0].data_type())));
                }
                let f = if lower.starts_with('l') { Func::Lower } else { Func::Upper };
                func(f, args, DataType::Utf8)
            }
            "concat" => {
                if args.is_empty() {
                    return Err(Error::plan("concat needs at least one argument"));
                }
                for a in &args {
                    if !matches!(a.data_type(), DataType::Utf8 | DataType::Null) {
                        return Err(Error::TypeMismatch(format!("concat needs strings, got {}", a.data_type())));
                    }
                }
                func(Func::Concat, args, DataType::Utf8)
            }
            "substring" | "substr" | "mid" | "substringutf8" => {
                if !(2..=3).contains(&args.len()) {
                    return Err(Error::plan(format!("{name} takes 2 or 3 arguments, got {}", args.len())));
                }
                string_arg(&args[0])?;
                let mut ints = Vec::with_capacity(2);
                for a in &args[1..] {
                    ints.push(match a {
                        Expr::Literal(Literal::UInt(v)) => i64::try_from(*v).unwrap_or(i64::MAX),
                        // `-3`, `1 + 1`: evaluated once here.
                        other => match other.constant_int()? {
                            Some(Some(v)) => v,
                            Some(None) => return Ok(Expr::Literal(Literal::Null)),
                            None => {
                                return Err(Error::plan(format!(
                                    "{name}: offset and length must be constant integers (no column), got an expression of type {}",
                                    other.data_type()
                                )));
                            }
                        },
                    });
                }
                let dtype = match args[0].data_type() {
                    DataType::Null => DataType::Utf8,
                    t => t,
                };
                args.truncate(1);
                func(Func::Substring { offset: ints[0], length: ints.get(1).copied() }, args, dtype)
            }
            "regexp_replace" | "replaceregexpall" | "replaceregexpone" => {
                arity(3, &args)?;
                string_arg(&args[0])?;
                let pattern = Pattern::new(&const_str(&args[1], "pattern")?)?;
                let replacement = Replacement::new(&const_str(&args[2], "replacement")?, &pattern)?;
                let dtype = match args[0].data_type() {
                    DataType::Null => DataType::Utf8,
                    t => t,
                };
                args.truncate(1);
                func(Func::RegexpReplace { pattern, replacement, all: lower != "replaceregexpone" }, args, dtype)
            }
            "match" | "regexp_matches" => {
                arity(2, &args)?;
                string_arg(&args[0])?;
                let pattern = Pattern::new(&const_str(&args[1], "pattern")?)?;
                args.truncate(1);
                func(Func::Match(pattern), args, DataType::Boolean)
            }
            "date_trunc" | "datetrunc" => {
                arity(2, &args)?;
                let name = const_str(&args[0], "unit")?;
                let unit = TruncUnit::parse(&name).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "DATE_TRUNC unit '{name}' (supported: second, minute, hour, day, week, month, quarter, year)"
                    ))
                })?;
                let t = time_arg(args.pop().expect("two arguments"))?;
                func(Func::Trunc(unit), vec![t], timestamp())
            }
            "tostartofminute" | "tostartofhour" | "tostartofday" => {
                arity(1, &args)?;
                let unit = match lower.as_str() {
                    "tostartofminute" => TruncUnit::Minute,
                    "tostartofhour" => TruncUnit::Hour,
                    _ => TruncUnit::Day,
                };
                let t = time_arg(args.pop().expect("one argument"))?;
                func(Func::Trunc(unit), vec![t], timestamp())
            }
            // ClickHouse's calendar starts return a Date.
            "tostartofweek" | "tomonday" | "tostartofmonth" | "tostartofquarter" | "tostartofyear" => {
                let unit = match lower.as_str() {
                    "tostartofweek" => {
                        // toStartOfWeek(t[, mode]): an odd mode starts weeks on Monday.
                        if !(1..=2).contains(&args.len()) {
                            return Err(Error::plan(format!("{name} takes 1 or 2 arguments, got {}", args.len())));
                        }
                        let monday = match args.get(1) {
                            None => false,
                            Some(m) => match m.constant_int()? {
                                Some(Some(m)) => m % 2 != 0,
                                _ => return Err(Error::plan(format!("{name}: the mode must be a constant integer"))),
                            },
                        };
                        args.truncate(1);
                        if monday { TruncUnit::Week } else { TruncUnit::WeekFromSunday }
                    }
                    "tomonday" => TruncUnit::Week,
                    "tostartofmonth" => TruncUnit::Month,
                    "tostartofquarter" => TruncUnit::Quarter,
                    _ => TruncUnit::Year,
                };
                arity(1, &args)?;
                let t = time_arg(args.pop().expect("one argument"))?;
                func(Func::ToDate, vec![Expr::Func { func: Func::Trunc(unit), args: vec![t], dtype: timestamp() }], DataType::Date32)
            }
            "tominute" | "minute" | "tohour" | "hour" | "tosecond" | "second" | "todayofmonth" | "dayofmonth"
            | "day" | "tomonth" | "month" | "toyear" | "year" | "toquarter" | "quarter" | "todayofweek"
            | "dayofweek" | "todayofyear" | "dayofyear" | "toisoweek" | "week" => {
                arity(1, &args)?;
                let part = match lower.trim_start_matches("to") {
                    "minute" => DatePart::Minute,
                    "hour" => DatePart::Hour,
                    "second" => DatePart::Second,
                    "year" => DatePart::Year,
                    "month" => DatePart::Month,
                    "quarter" => DatePart::Quarter,
                    "dayofweek" => DatePart::DayOfWeek,
                    "dayofyear" => DatePart::DayOfYear,
                    "isoweek" | "week" => DatePart::IsoWeek,
                    _ => DatePart::Day,
                };
                let t = time_arg(args.pop().expect("one argument"))?;
                func(Func::Part(part), vec![t], part.data_type())
            }
            _ if interval_function(&lower).is_some() => {
                // ClickHouse's addDays(t, n), subtractMonths(t, n), ...
                arity(2, &args)?;
                let unit = interval_function(&lower).expect("checked by the guard");
                let n = match args[1].constant_int()? {
                    Some(Some(n)) => n,
                    Some(None) => return Ok(Expr::Literal(Literal::Null)),
                    None => return Err(Error::plan(format!("{name}: the number of units must be a constant integer"))),
                };
                let n = if lower.starts_with("subtract") {
                    n.checked_neg().ok_or_else(|| Error::InvalidArgument(format!("{name}: {n} units overflow")))?
                } else {
                    n
                };
                args.truncate(1);
                Expr::add_interval(args.pop().expect("one argument"), n, unit)
            }
            "todatetime" => {
                // ClickHouse's toDateTime: a timestamp from a date (its midnight, UTC), a
                // string ('2013-07-20 12:00:00') or seconds since 1970-01-01.
                arity(1, &args)?;
                let x = args.pop().expect("one argument");
                match x.data_type() {
                    DataType::Timestamp(TimeUnit::Second, None) | DataType::Null => Ok(x),
                    t if t == DataType::Date32 || is_string(&t) || t.is_integer() => Expr::cast(x, timestamp()),
                    t => Err(Error::TypeMismatch(format!("{name} needs a date, string or integer, got {t}"))),
                }
            }
            "todate" => {
                arity(1, &args)?;
                match args[0].data_type() {
                    DataType::Date32 => Ok(args.pop().expect("one argument")),
                    DataType::Utf8 => Expr::cast(args.pop().expect("one argument"), DataType::Date32),
                    _ => {
                        let t = time_arg(args.pop().expect("one argument"))?;
                        func(Func::ToDate, vec![t], DataType::Date32)
                    }
                }
            }
            "coalesce" | "ifnull" => {
                if args.is_empty() {
                    return Err(Error::plan(format!("{name} needs at least one argument")));
                }
                let mut dtype = DataType::Null;
                for a in &args {
                    let t = a.data_type();
                    dtype = common_type(&dtype, &t, false)
                        .ok_or_else(|| Error::TypeMismatch(format!("{name} of types {dtype} and {t}")))?;
                }
                func(Func::Coalesce, args, dtype)
            }
            "if" => {
                arity(3, &args)?;
                let b = args.pop().expect("three");
                let a = args.pop().expect("three");
                let c = args.pop().expect("three");
                Expr::case(vec![(c, a)], Some(b))
            }
            "intdiv" => {
                arity(2, &args)?;
                let r = args.pop().expect("two");
                let l = args.pop().expect("two");
                Expr::arith(ArithOp::IntDiv, l, r)
            }
            _ => Err(Error::not_implemented(format!("function {name}"))),
        }
    }
}

mod eval;
mod pattern;
mod seq;

pub use eval::{evaluate, true_mask};
pub use pattern::{Pattern, Replacement};

#[cfg(test)]
mod tests;
