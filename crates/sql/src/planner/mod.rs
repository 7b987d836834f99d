//! AST to plan: [`plan`] parses one statement and dispatches it; `Ctx` translates AST
//! expressions into typed ones (columns, literals, functions, aggregates, aliases); the
//! [`query`] module plans a SELECT's shape (scan or aggregation, ORDER BY, LIMIT).

use std::cell::RefCell;
use std::sync::Arc;

use arrow::datatypes::DataType;
use sqlparser::ast::{
    self, BinaryOperator, DateTimeField, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, InTarget,
    LimitClause, ObjectName, OrderByKind, OrderBySort, SelectItem, SetExpr, TableFactor, UnaryOperator,
};
use tessera_common::{Error, Result, Table};
use tessera_exec::expr::{ArithOp, DatePart, Expr as XExpr, Func, IntervalUnit, Literal as XLit};

use crate::statement::Statement;
use tessera_exec::{
    AggExpr, AggFunc, AggOutput, AggregatePlan, CmpOp, LikePattern, OrderLimit, Plan, Predicate, QuantileKind, QuantileLevel,
    ScalarExpr, ScanPlan, SortKey, Value,
};

/// Parses and plans one SQL statement. `catalog` resolves table names.
///
/// # Errors
/// [`Error::Parse`] for malformed SQL, [`Error::UnknownTable`], [`Error::UnknownColumn`],
/// [`Error::TypeMismatch`], [`Error::Plan`] for invalid queries, [`Error::NotImplemented`]
/// for valid SQL outside the supported subset.
pub fn plan(sql: &str, catalog: &dyn Fn(&str) -> Option<Arc<Table>>) -> Result<Statement> {
    let stmts = crate::lex::parse_statements(sql)?;
    let stmt = match stmts.len() {
        0 => return Err(Error::Parse("empty statement".into())),
        1 => stmts.into_iter().next().expect("one statement"),
        n => return Err(Error::InvalidArgument(format!("{n} statements given; send one at a time"))),
    };
    match stmt {
        ast::Statement::Query(q) => plan_query(&q, catalog),
        ast::Statement::Set(ast::Set::SingleAssignment { variable, values, .. }) => {
            let [value] = values.as_slice() else {
                return Err(Error::not_implemented("SET with several values"));
            };
            Ok(Statement::Set { name: object_name(&variable), value: setting_value(value)? })
        }
        ast::Statement::CreateTable(ct) => crate::ddl::create_table(&ct),
        ast::Statement::Insert(ins) => crate::ddl::insert(&ins, catalog),
        ast::Statement::OptimizeTable { name, .. } => Ok(crate::ddl::optimize(&name)),
        other => Err(Error::not_implemented(format!("statement {}", first_words(&other.to_string())))),
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

fn object_name(n: &ObjectName) -> String {
    n.0.iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => i.value.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn setting_value(e: &Expr) -> Result<String> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => Ok(n.to_string()),
            ast::Value::SingleQuotedString(s) => Ok(s.clone()),
            ast::Value::Boolean(b) => Ok(if *b { "1".into() } else { "0".into() }),
            other => Err(Error::InvalidArgument(format!("setting value {other}"))),
        },
        Expr::Identifier(i) => Ok(i.value.clone()),
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => Ok(format!("-{}", setting_value(expr)?)),
        other => Err(Error::InvalidArgument(format!("setting value {other} is not a literal"))),
    }
}

/// A SELECT-list entry after analysis.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Scalar(ScalarExpr),
    Agg(AggExpr),
    /// An expression over other items computed after the aggregation (`Expr::Column(j)` is
    /// `parts[j]`, a key or an aggregate).
    Post { expr: XExpr, parts: Vec<Item> },
}

struct Ctx<'a> {
    table: &'a Arc<Table>,
    /// `FROM t AS alias`.
    alias: Option<String>,
    /// Expressions behind [`ScalarExpr::Computed`] (interned: equal expressions share one).
    computed: RefCell<Vec<XExpr>>,
}

/// A hook of [`Ctx::expr_with`]: a replacement for a sub-expression (HAVING maps aggregates
/// and keys to output columns), or `None` to build it as usual.
type Hook<'h> = &'h mut dyn FnMut(&Expr) -> Result<Option<XExpr>>;

impl Ctx<'_> {
    fn column(&self, name: &str) -> Result<usize> {
        self.table.column_index(name).ok_or_else(|| Error::UnknownColumn {
            table: self.table.name().to_string(),
            column: name.to_string(),
        })
    }

    fn dtype(&self, c: usize) -> &DataType {
        self.table.schema().field(c).data_type()
    }

    /// The table column an identifier names.
    fn column_ref(&self, e: &Expr) -> Result<usize> {
        match e {
            Expr::Identifier(i) => self.column(&i.value),
            Expr::CompoundIdentifier(parts) => {
                let [qualifier, column] = parts.as_slice() else {
                    return Err(Error::not_implemented(format!("qualified name {e}")));
                };
                let q = &qualifier.value;
                let known = q.eq_ignore_ascii_case(self.table.name())
                    || self.alias.as_ref().is_some_and(|a| a.eq_ignore_ascii_case(q));
                if !known {
                    return Err(Error::UnknownTable(q.clone()));
                }
                self.column(&column.value)
            }
            Expr::Nested(inner) => self.column_ref(inner),
            other => Err(Error::internal(format!("column_ref of {other}"))),
        }
    }

    /// A typed expression over the table's columns.
    fn expr(&self, e: &Expr) -> Result<XExpr> {
        self.expr_with(e, &mut |_| Ok(None))
    }

    /// `INTERVAL n unit` as (n, unit): `INTERVAL 3 DAY`, `INTERVAL '3' DAY`, `INTERVAL '3 days'`,
    /// `INTERVAL (1 + 2) HOUR` (a constant integer).
    fn interval(&self, i: &ast::Interval) -> Result<(i64, IntervalUnit)> {
        let bad = || Error::plan(format!("{i}: expected a constant integer number of one unit (second .. year)"));
        if i.last_field.is_some() || i.fractional_seconds_precision.is_some() {
            return Err(bad());
        }
        let unit_of = |name: &str| {
            IntervalUnit::parse(name).ok_or_else(|| Error::InvalidArgument(format!("INTERVAL unit '{name}' (supported: second, minute, hour, day, week, month, quarter, year)")))
        };
        let (n, unit) = match (literal(&i.value), &i.leading_field) {
            (Some(Ok(Lit::Str(text))), None) => {
                let mut words = text.split_whitespace();
                match (words.next(), words.next(), words.next()) {
                    (Some(n), Some(u), None) => (n.parse::<i64>().map_err(|_| bad())?, unit_of(u)?),
                    _ => return Err(bad()),
                }
            }
            (Some(Ok(Lit::Str(text))), Some(f)) => (text.trim().parse::<i64>().map_err(|_| bad())?, unit_of(&f.to_string())?),
            (_, Some(f)) => match self.expr(&i.value)?.constant_int()? {
                Some(Some(n)) => (n, unit_of(&f.to_string())?),
                _ => return Err(bad()),
            },
            (_, None) => return Err(bad()),
        };
        Ok((n, unit))
    }

    /// A typed expression; `hook` may replace any sub-expression first.
    fn expr_with(&self, e: &Expr, hook: Hook<'_>) -> Result<XExpr> {
        if let Some(x) = hook(e)? {
            return Ok(x);
        }
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                let c = self.column_ref(e)?;
                Ok(XExpr::column(c, self.dtype(c).clone()))
            }
            Expr::Nested(inner) => self.expr_with(inner, hook),
            Expr::Value(v) if matches!(v.value, ast::Value::Null) => Ok(XExpr::literal(XLit::Null)),
            Expr::Value(v) if matches!(v.value, ast::Value::Boolean(_)) => {
                Ok(XExpr::literal(XLit::Bool(matches!(v.value, ast::Value::Boolean(true)))))
            }
            // `DATE '2013-07-15'`, `TIMESTAMP '2013-07-15 12:00:00'`: typed constants.
            Expr::TypedString(ts) if matches!(ts.data_type, ast::DataType::Date | ast::DataType::Timestamp(..) | ast::DataType::Datetime(_)) => {
                let to = if ts.data_type == ast::DataType::Date { DataType::Date32 } else { DataType::Timestamp(arrow::datatypes::TimeUnit::Second, None) };
                coerce_literal(&to, lit_expr(literal(e).expect("a typed string")?)?)
            }
            _ if literal(e).is_some() => lit_expr(literal(e).expect("a literal")?),
            Expr::UnaryOp { op: UnaryOperator::Minus, expr } => {
                XExpr::arith(ArithOp::Sub, XExpr::literal(XLit::UInt(0)), self.expr_with(expr, hook)?)
            }
            Expr::UnaryOp { op: UnaryOperator::Plus, expr } => self.expr_with(expr, hook),
            Expr::UnaryOp { op: UnaryOperator::Not, expr } => XExpr::not(self.expr_with(expr, hook)?),
            Expr::BinaryOp { op: op @ (BinaryOperator::And | BinaryOperator::Or), .. } => {
                let terms = chain(e, op).into_iter().map(|t| self.expr_with(t, hook)).collect::<Result<Vec<_>>>()?;
                if *op == BinaryOperator::And { XExpr::and(terms) } else { XExpr::or(terms) }
            }
            Expr::BinaryOp { left, op: op @ (BinaryOperator::Plus | BinaryOperator::Minus), right }
                if matches!(**left, Expr::Interval(_)) || matches!(**right, Expr::Interval(_)) =>
            {
                // `t + INTERVAL n unit`, `INTERVAL n unit + t`, `t - INTERVAL n unit`.
                let (t, interval, minus) = match (&**left, &**right) {
                    (t, Expr::Interval(i)) => (t, i, *op == BinaryOperator::Minus),
                    (Expr::Interval(i), t) if *op == BinaryOperator::Plus => (t, i, false),
                    _ => return Err(Error::plan(format!("{e}: an interval can be added to or subtracted from a date or timestamp, not the reverse"))),
                };
                let (n, unit) = self.interval(interval)?;
                let n = if minus { n.checked_neg().ok_or_else(|| Error::InvalidArgument(format!("{e}: interval overflow")))? } else { n };
                XExpr::add_interval(self.expr_with(t, hook)?, n, unit)
            }
            Expr::Interval(i) => Err(Error::not_implemented(format!("{i} outside `date_or_timestamp +/- INTERVAL`"))),
            Expr::BinaryOp { left, op, right } => {
                let l = self.expr_with(left, hook)?;
                let r = self.expr_with(right, hook)?;
                let arith = |a| XExpr::arith(a, l.clone(), r.clone());
                match op {
                    BinaryOperator::Plus => arith(ArithOp::Add),
                    BinaryOperator::Minus => arith(ArithOp::Sub),
                    BinaryOperator::Multiply => arith(ArithOp::Mul),
                    BinaryOperator::Divide => arith(ArithOp::Div),
                    BinaryOperator::Modulo => arith(ArithOp::Rem),
                    BinaryOperator::MyIntegerDivide | BinaryOperator::DuckIntegerDivide => arith(ArithOp::IntDiv),
                    other => match cmp_op(other) {
                        Some(c) => compare(c, l, r),
                        None => Err(Error::not_implemented(format!("operator {other}"))),
                    },
                }
            }
            Expr::IsNull(x) => Ok(XExpr::is_null(self.expr_with(x, hook)?, false)),
            Expr::IsNotNull(x) => Ok(XExpr::is_null(self.expr_with(x, hook)?, true)),
            Expr::In { expr, target: InTarget::List(list), negated, .. } => {
                let x = self.expr_with(expr, hook)?;
                let t = x.data_type();
                let items = list.iter().map(|v| coerce_literal(&t, self.expr_with(v, hook)?)).collect::<Result<Vec<_>>>()?;
                XExpr::in_list(x, items, *negated)
            }
            Expr::In { .. } => Err(Error::not_implemented("IN with a subquery, UNNEST or table")),
            Expr::Between { expr, negated, low, high } => {
                let x = self.expr_with(expr, hook)?;
                let lo = self.expr_with(low, hook)?;
                let hi = self.expr_with(high, hook)?;
                let b = XExpr::and(vec![compare(CmpOp::GtEq, x.clone(), lo)?, compare(CmpOp::LtEq, x, hi)?])?;
                if *negated { XExpr::not(b) } else { Ok(b) }
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                let operand = operand.as_ref().map(|o| self.expr_with(o, hook)).transpose()?;
                let mut branches = Vec::with_capacity(conditions.len());
                for cw in conditions {
                    let c = self.expr_with(&cw.condition, hook)?;
                    let c = match &operand {
                        Some(o) => compare(CmpOp::Eq, o.clone(), c)?,
                        None => c,
                    };
                    branches.push((c, self.expr_with(&cw.result, hook)?));
                }
                let otherwise = else_result.as_ref().map(|x| self.expr_with(x, hook)).transpose()?;
                XExpr::case(branches, otherwise)
            }
            Expr::Cast { kind: ast::CastKind::Cast | ast::CastKind::DoubleColon, expr, data_type, format: None } => {
                let x = self.expr_with(expr, hook)?;
                let to = arrow_type(data_type)?;
                // A string constant cast to a date or timestamp parses as in comparisons.
                match coerce_literal(&to, x)? {
                    x if x.data_type() == to => Ok(x),
                    x => XExpr::cast(x, to),
                }
            }
            Expr::Cast { .. } => Err(Error::not_implemented(format!("{e}"))),
            Expr::Like { negated, any: false, expr, pattern, escape_char }
            | Expr::ILike { negated, any: false, expr, pattern, escape_char } => {
                let text = match literal(pattern) {
                    Some(Ok(Lit::Str(s))) => s,
                    _ => return Err(Error::not_implemented(format!("LIKE with a non-literal pattern: {pattern}"))),
                };
                let text = match escape_char {
                    None => text,
                    Some(esc) => match literal(esc) {
                        Some(Ok(Lit::Str(c))) => with_backslash_escapes(&text, &c)?,
                        _ => return Err(Error::plan(format!("LIKE ... ESCAPE {esc}: the escape must be a constant string"))),
                    },
                };
                XExpr::like(self.expr_with(expr, hook)?, text, *negated, matches!(e, Expr::ILike { .. }))
            }
            Expr::Like { .. } | Expr::ILike { .. } => Err(Error::not_implemented("LIKE ANY / LIKE ALL")),
            Expr::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![self.expr_with(expr, hook)?];
                args.push(match substring_from {
                    Some(from) => self.expr_with(from, hook)?,
                    None => XExpr::literal(XLit::UInt(1)),
                });
                if let Some(n) = substring_for {
                    args.push(self.expr_with(n, hook)?);
                }
                XExpr::function("substring", args)
            }
            Expr::Extract { field, expr, .. } => {
                let name = match field {
                    DateTimeField::Minute => "toMinute",
                    DateTimeField::Hour => "toHour",
                    DateTimeField::Second => "toSecond",
                    DateTimeField::Day => "toDayOfMonth",
                    DateTimeField::Month => "toMonth",
                    DateTimeField::Year => "toYear",
                    DateTimeField::Quarter => "toQuarter",
                    DateTimeField::Week(None) | DateTimeField::IsoWeek => "toISOWeek",
                    DateTimeField::Isodow => "toDayOfWeek",
                    DateTimeField::DayOfYear | DateTimeField::Doy => "toDayOfYear",
                    // Sunday 0 .. Saturday 6, as DuckDB and PostgreSQL.
                    DateTimeField::DayOfWeek | DateTimeField::Dow => {
                        let d = XExpr::function("toDayOfWeek", vec![self.expr_with(expr, hook)?])?;
                        return XExpr::arith(ArithOp::Rem, d, XExpr::literal(XLit::UInt(7)));
                    }
                    // Seconds since 1970-01-01 00:00:00 UTC.
                    DateTimeField::Epoch => {
                        let t = XExpr::function("toDateTime", vec![self.expr_with(expr, hook)?])?;
                        return XExpr::cast(t, DataType::Int64);
                    }
                    other => return Err(Error::not_implemented(format!("extract({other} FROM ..)"))),
                };
                XExpr::function(name, vec![self.expr_with(expr, hook)?])
            }
            Expr::Function(f) => {
                let name = object_name(&f.name);
                if agg_func(&name.to_ascii_lowercase()).is_some() {
                    return Err(Error::plan(format!("aggregate {e} is not allowed here")));
                }
                if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
                    return Err(Error::not_implemented(format!("{e}")));
                }
                let args = plain_args(f)?
                    .into_iter()
                    .map(|a| match a {
                        FunctionArgExpr::Expr(x) => self.expr_with(x, hook),
                        other => Err(Error::plan(format!("argument {other} of {name}"))),
                    })
                    .collect::<Result<Vec<_>>>()?;
                if name.eq_ignore_ascii_case("tostring") {
                    // ClickHouse's toString: CAST to String (integers, strings and dates
                    // print as ClickHouse prints them; floats and timestamps as Arrow does).
                    return match <[XExpr; 1]>::try_from(args) {
                        Ok([x]) => XExpr::cast(x, DataType::Utf8),
                        Err(v) => Err(Error::plan(format!("toString takes 1 argument, got {}", v.len()))),
                    };
                }
                XExpr::function(&name, args)
            }
            other => Err(Error::not_implemented(format!("expression {other}"))),
        }
    }

    /// A scalar (non-aggregate) expression: a column, `toMinute(ts)` on its SIMD kernel,
    /// or a computed expression.
    fn scalar(&self, e: &Expr) -> Result<ScalarExpr> {
        Ok(self.intern(self.expr(e)?, true))
    }

    /// The [`ScalarExpr`] of `x`, adding it to the computed expressions if needed. Boolean
    /// values become `UInt8` 0/1 (ClickHouse's booleans).
    fn intern(&self, x: XExpr, minute: bool) -> ScalarExpr {
        if let XExpr::Column { index, .. } = x {
            return ScalarExpr::Column(index);
        }
        if let XExpr::Func { func: Func::Part(DatePart::Minute), args, .. } = &x
            && let [XExpr::Column { index, dtype: DataType::Timestamp(_, _) }] = args.as_slice()
            && minute
        {
            return ScalarExpr::Minute(*index);
        }
        let x = if x.data_type() == DataType::Boolean {
            XExpr::cast(x, DataType::UInt8).expect("Arrow casts booleans to UInt8")
        } else {
            x
        };
        let mut computed = self.computed.borrow_mut();
        let i = match computed.iter().position(|y| *y == x) {
            Some(i) => i,
            None => {
                computed.push(x);
                computed.len() - 1
            }
        };
        ScalarExpr::Computed(i)
    }

    /// The [`ScalarExpr`] `x` already has (a column or an interned expression), if any.
    fn find_scalar(&self, x: &XExpr) -> Option<ScalarExpr> {
        match x {
            XExpr::Column { index, .. } => Some(ScalarExpr::Column(*index)),
            _ => {
                if let XExpr::Func { func: Func::Part(DatePart::Minute), args, .. } = x
                    && let [XExpr::Column { index, .. }] = args.as_slice()
                {
                    return Some(ScalarExpr::Minute(*index));
                }
                self.computed.borrow().iter().position(|y| y == x).map(ScalarExpr::Computed)
            }
        }
    }

    fn scalar_type(&self, s: &ScalarExpr) -> DataType {
        match *s {
            ScalarExpr::Column(c) => self.dtype(c).clone(),
            ScalarExpr::Minute(_) => DataType::UInt8,
            ScalarExpr::Computed(i) => self.computed.borrow()[i].data_type(),
        }
    }

    /// A SELECT/ORDER BY expression: scalar or aggregate.
    fn item(&self, e: &Expr) -> Result<Item> {
        if let Expr::Function(f) = e {
            let name = object_name(&f.name).to_ascii_lowercase();
            if let Some(mut func) = agg_func(&name) {
                if let FunctionArguments::List(l) = &f.args
                    && l.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct)
                {
                    if func != AggFunc::Count {
                        return Err(Error::not_implemented(format!("{}(DISTINCT ..)", name.to_uppercase())));
                    }
                    func = AggFunc::CountDistinct;
                }
                if f.filter.is_some() || f.over.is_some() {
                    return Err(Error::not_implemented(format!("{e}")));
                }
                let mut args = plain_args(f)?;
                let params = plain_params(f)?;
                if func.takes_level() {
                    // ClickHouse `quantile(0.9)(x)`, DuckDB `quantile_cont(x, 0.9)`
                    // (`quantile(x, 0.9)` is DuckDB's `quantile_disc`); the median without.
                    let level = match (params.as_slice(), args.as_slice()) {
                        ([l], [_]) => Some(*l),
                        ([], [_, FunctionArgExpr::Expr(l)]) => {
                            if name == "quantile" {
                                func = AggFunc::Quantile(QuantileKind::Disc, QuantileLevel::HALF);
                            }
                            args.truncate(1);
                            Some(l)
                        }
                        // The median: `median(x)`, and ClickHouse's level-less `quantile(x)`.
                        ([], [_]) if !name.starts_with("quantile_") => None,
                        _ => return Err(Error::plan(format!("{} takes a level and one argument", name.to_uppercase()))),
                    };
                    if let Some(l) = level {
                        let value = match literal(l) {
                            Some(Ok(Lit::Float(v))) => Some(v),
                            Some(Ok(Lit::Int(i))) => Some(i as f64),
                            _ => None,
                        };
                        let level = value.and_then(QuantileLevel::new).ok_or_else(|| {
                            Error::plan(format!("the level of {} must be a number in [0, 1], got {l}", name.to_uppercase()))
                        })?;
                        func = func.with_level(level);
                    }
                } else if !params.is_empty() {
                    return Err(Error::not_implemented(format!("parameters of {}", name.to_uppercase())));
                }
                return match (func, args.as_slice()) {
                    (AggFunc::Count, [FunctionArgExpr::Wildcard]) | (AggFunc::Count, []) => {
                        Ok(Item::Agg(AggExpr { func: AggFunc::CountStar, input: None }))
                    }
                    (AggFunc::Sum, [FunctionArgExpr::Expr(a)]) if self.sum_shift(a).is_some() => {
                        // SUM(x + c) = SUM(x) + c * COUNT(x) (ClickHouse's
                        // optimize_arithmetic_operations_in_aggregate_functions): Q30's 90
                        // sums become one SUM and one COUNT.
                        let (col, c) = self.sum_shift(a).expect("checked");
                        let x = Some(ScalarExpr::Column(col));
                        let parts = vec![
                            Item::Agg(AggExpr { func: AggFunc::Sum, input: x }),
                            Item::Agg(AggExpr { func: AggFunc::Count, input: x }),
                        ];
                        let c = XExpr::literal(if c < 0 { XLit::Int(c) } else { XLit::UInt(c as u64) });
                        let scaled = XExpr::arith(ArithOp::Mul, c, XExpr::column(1, DataType::Int64))?;
                        let expr = XExpr::arith(ArithOp::Add, XExpr::column(0, DataType::Int64), scaled)?;
                        Ok(Item::Post { expr, parts })
                    }
                    (_, [FunctionArgExpr::Expr(a)]) => {
                        let input = self.intern(self.expr(a)?, false);
                        let dt = self.scalar_type(&input);
                        let orderable = dt.is_numeric() || dt.is_temporal() || matches!(dt, DataType::Utf8 | DataType::Binary);
                        if func.needs_number() && !dt.is_numeric() {
                            return Err(Error::TypeMismatch(format!("{} of {}", name.to_uppercase(), dt)));
                        }
                        if func.needs_value() && !orderable {
                            return Err(Error::not_implemented(format!("{} over {}", name.to_uppercase(), dt)));
                        }
                        Ok(Item::Agg(AggExpr { func, input: Some(input) }))
                    }
                    _ => Err(Error::plan(format!("{} takes one argument", name.to_uppercase()))),
                };
            }
        }
        match self.scalar(e) {
            // An expression over aggregates (`SUM(a) / COUNT(*)`, `COUNT(*) + 1`).
            Err(Error::Plan(m)) if m.starts_with("aggregate ") => self.post_item(e),
            other => Ok(Item::Scalar(other?)),
        }
    }

    /// `e` as an expression over aggregates and columns computed after the aggregation.
    fn post_item(&self, e: &Expr) -> Result<Item> {
        let mut parts: Vec<Item> = Vec::new();
        let mut hook = |x: &Expr| -> Result<Option<XExpr>> {
            let is_agg = matches!(x, Expr::Function(f) if agg_func(&object_name(&f.name).to_ascii_lowercase()).is_some());
            let item = if is_agg {
                self.item(x)?
            } else if is_column(x) {
                Item::Scalar(ScalarExpr::Column(self.column_ref(x)?))
            } else {
                return Ok(None);
            };
            let part = |item: Item, parts: &mut Vec<Item>| match parts.iter().position(|p| *p == item) {
                Some(j) => j,
                None => {
                    parts.push(item);
                    parts.len() - 1
                }
            };
            Ok(Some(match item {
                // Inlined: projections read keys and aggregates only.
                Item::Post { expr, parts: inner } => {
                    let idx: Vec<usize> = inner.into_iter().map(|i| part(i, &mut parts)).collect();
                    expr.map_columns(&|j| idx[j])
                }
                item => {
                    let t = self.item_type(&item);
                    XExpr::column(part(item, &mut parts), t)
                }
            }))
        };
        let expr = self.expr_with(e, &mut hook)?;
        Ok(Item::Post { expr, parts })
    }

    /// The type of an item's values.
    fn item_type(&self, item: &Item) -> DataType {
        match item {
            Item::Scalar(s) => self.scalar_type(s),
            Item::Agg(a) => a.func.output_type(a.input.map(|s| self.scalar_type(&s)).as_ref()),
            Item::Post { expr, .. } => expr.data_type(),
        }
    }

    /// `(column, c)` when `e` is `x + c`, `c + x` or `x - c` (as `x + -c`) for an integer
    /// column `x` of at most 32 bits (its SUM is Int64) and an integer constant `|c| <= 2^31`.
    fn sum_shift(&self, e: &Expr) -> Option<(usize, i64)> {
        let Expr::BinaryOp { left, op, right } = strip(e) else { return None };
        let narrow = |x: &Expr| {
            let c = is_column(x).then(|| self.column_ref(x).ok()).flatten()?;
            matches!(
                self.dtype(c),
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 | DataType::UInt32
            )
            .then_some(c)
        };
        let constant = |x: &Expr| match literal(x) {
            Some(Ok(Lit::Int(i))) if i.unsigned_abs() <= 1 << 31 => Some(i as i64),
            _ => None,
        };
        match op {
            BinaryOperator::Plus => match (narrow(left), constant(right), constant(left), narrow(right)) {
                (Some(x), Some(c), _, _) | (_, _, Some(c), Some(x)) => Some((x, c)),
                _ => None,
            },
            BinaryOperator::Minus => Some((narrow(left)?, -constant(right)?)),
            _ => None,
        }
    }

    /// A WHERE condition: column-vs-constant comparisons, column-vs-column comparisons of
    /// one type, LIKE shapes and IN lists of constants become [`Predicate`]s on the SIMD
    /// kernels; anything else a general boolean expression.
    fn predicate(&self, e: &Expr) -> Result<Predicate> {
        let general = || -> Result<Predicate> {
            let x = self.expr(e)?;
            match x.data_type() {
                DataType::Boolean | DataType::Null => Ok(Predicate::Expr(Box::new(x))),
                other => Err(Error::TypeMismatch(format!("WHERE needs a boolean condition, {e} is {other}"))),
            }
        };
        match e {
            Expr::Nested(inner) => self.predicate(inner),
            Expr::UnaryOp { op: UnaryOperator::Not, expr } => Ok(Predicate::Not(Box::new(self.predicate(expr)?))),
            Expr::BinaryOp { op: BinaryOperator::And, .. } => {
                Ok(Predicate::And(chain(e, &BinaryOperator::And).into_iter().map(|t| self.predicate(t)).collect::<Result<_>>()?))
            }
            Expr::BinaryOp { op: BinaryOperator::Or, .. } => {
                Ok(Predicate::Or(chain(e, &BinaryOperator::Or).into_iter().map(|t| self.predicate(t)).collect::<Result<_>>()?))
            }
            Expr::BinaryOp { left, op, right } if cmp_op(op).is_some() => {
                let op = cmp_op(op).expect("a comparison");
                match (is_column(left), literal(left), is_column(right), literal(right)) {
                    (true, _, true, _) => {
                        let (l, r) = (self.column_ref(left)?, self.column_ref(right)?);
                        if self.dtype(l) == self.dtype(r) {
                            Ok(Predicate::CmpColumns { left: l, op, right: r })
                        } else {
                            general()
                        }
                    }
                    // A constant the column kernels cannot take (an integer column against
                    // 1.5) goes to the general comparison.
                    (true, _, _, Some(lit)) => match self.cmp_literal(left, op, lit?) {
                        Err(Error::NotImplemented(_)) => general(),
                        p => p,
                    },
                    (_, Some(lit), true, _) => match self.cmp_literal(right, op.flip(), lit?) {
                        Err(Error::NotImplemented(_)) => general(),
                        p => p,
                    },
                    _ => general(),
                }
            }
            // `x BETWEEN a AND b` on a column and constants: two comparisons, so the kernels
            // take them and granule pruning sees the range (the general form hides it).
            Expr::Between { expr, negated, low, high }
                if is_column(expr) && matches!(literal(low), Some(Ok(_))) && matches!(literal(high), Some(Ok(_))) =>
            {
                let lo = self.cmp_literal(expr, CmpOp::GtEq, literal(low).expect("a literal")?);
                let hi = self.cmp_literal(expr, CmpOp::LtEq, literal(high).expect("a literal")?);
                match (lo, hi) {
                    (Ok(lo), Ok(hi)) => {
                        let both = Predicate::And(vec![lo, hi]);
                        Ok(if *negated { Predicate::Not(Box::new(both)) } else { both })
                    }
                    (Err(Error::NotImplemented(_)), _) | (_, Err(Error::NotImplemented(_))) => general(),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            }
            Expr::Like { negated, any: false, expr, pattern, escape_char: None } if is_column(expr) => {
                let column = self.column_ref(expr)?;
                if !matches!(self.dtype(column), DataType::Utf8 | DataType::Binary) {
                    return Err(Error::TypeMismatch(format!("LIKE needs a string, {expr} is {}", self.dtype(column))));
                }
                let text = match literal(pattern) {
                    Some(Ok(Lit::Str(s))) => s,
                    _ => return Err(Error::not_implemented(format!("LIKE with a non-literal pattern: {pattern}"))),
                };
                if text.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1 {
                    // ClickHouse: CANNOT_PARSE_ESCAPE_SEQUENCE.
                    return Err(Error::Parse(format!("LIKE pattern '{text}' ends with an escape character (\\)")));
                }
                match LikePattern::parse(&text) {
                    Some(pattern) => {
                        let p = Predicate::Like { column, pattern };
                        Ok(if *negated { Predicate::Not(Box::new(p)) } else { p })
                    }
                    None => general(),
                }
            }
            Expr::In { expr, target: InTarget::List(list), negated, .. }
                if is_column(expr) && !list.is_empty() && list.iter().all(|v| matches!(literal(v), Some(Ok(_)))) =>
            {
                let terms = list
                    .iter()
                    .map(|v| self.cmp_literal(expr, CmpOp::Eq, literal(v).expect("a literal")?))
                    .collect::<Result<Vec<_>>>()?;
                let any = Predicate::Or(terms);
                Ok(if *negated { Predicate::Not(Box::new(any)) } else { any })
            }
            _ => general(),
        }
    }
    fn cmp_literal(&self, col_expr: &Expr, op: CmpOp, lit: Lit) -> Result<Predicate> {
        let column = self.column_ref(col_expr)?;
        let dt = self.dtype(column);
        let mismatch = |what: &str| {
            Error::TypeMismatch(format!("cannot compare column {col_expr} of type {dt} with {what}"))
        };
        let value = match (dt, &lit) {
            (DataType::Utf8 | DataType::Binary, Lit::Str(s)) => Value::Bytes(s.as_bytes().to_vec()),
            (DataType::Float32 | DataType::Float64, Lit::Int(i)) => Value::Float(*i as f64),
            (DataType::Float32 | DataType::Float64, Lit::Float(f)) => Value::Float(*f),
            (DataType::Date32, Lit::Str(s)) => Value::Int(parse_date(s).ok_or_else(|| mismatch(&format!("'{s}' (not a date)")))?),
            (DataType::Timestamp(_, _), Lit::Str(s)) => {
                Value::Int(parse_timestamp(s).ok_or_else(|| mismatch(&format!("'{s}' (not a timestamp)")))?)
            }
            (dt, Lit::Int(i)) if dt.is_integer() => Value::Int(*i),
            (dt, Lit::Float(f)) if dt.is_integer() => {
                if f.fract() == 0.0 && f.abs() < 1e30 {
                    Value::Int(*f as i128)
                } else {
                    return Err(Error::not_implemented(format!("comparing integer column {col_expr} with {f}")));
                }
            }
            (_, Lit::Str(s)) => return Err(mismatch(&format!("string '{s}'"))),
            (_, Lit::Int(i)) => return Err(mismatch(&format!("number {i}"))),
            (_, Lit::Float(f)) => return Err(mismatch(&format!("number {f}"))),
        };
        Ok(Predicate::Cmp { column, op, value })
    }
}

/// The comparison operator of `op`, if it is one.
fn cmp_op(op: &BinaryOperator) -> Option<CmpOp> {
    Some(match op {
        BinaryOperator::Eq => CmpOp::Eq,
        BinaryOperator::NotEq => CmpOp::NotEq,
        BinaryOperator::Lt => CmpOp::Lt,
        BinaryOperator::LtEq => CmpOp::LtEq,
        BinaryOperator::Gt => CmpOp::Gt,
        BinaryOperator::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

/// `e` without parentheses.
fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => strip(inner),
        other => other,
    }
}

/// Whether `e` names a column (possibly parenthesised).
fn is_column(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Nested(inner) => is_column(inner),
        _ => false,
    }
}

/// A literal as a typed constant: non-negative integers `UInt64`, negative `Int64`.
fn lit_expr(l: Lit) -> Result<XExpr> {
    Ok(XExpr::literal(match l {
        Lit::Int(i) if i >= 0 => XLit::UInt(u64::try_from(i).map_err(|_| Error::Overflow(format!("integer literal {i}")))?),
        Lit::Int(i) => XLit::Int(i64::try_from(i).map_err(|_| Error::Overflow(format!("integer literal {i}")))?),
        Lit::Float(f) => XLit::Float(f),
        Lit::Str(s) => XLit::Str(s),
    }))
}

/// A string constant compared with (or cast to) a date or timestamp, read as one
/// (`'2013-07-01'`, `'2013-07-01 12:00:00'`); other expressions unchanged.
fn coerce_literal(target: &DataType, x: XExpr) -> Result<XExpr> {
    let XExpr::Literal(XLit::Str(s)) = &x else { return Ok(x) };
    match target {
        DataType::Date32 => {
            let d = parse_date(s).ok_or_else(|| Error::TypeMismatch(format!("'{s}' is not a date")))?;
            Ok(XExpr::literal(XLit::Date(d as i32)))
        }
        DataType::Timestamp(_, _) => {
            let t = parse_timestamp(s).ok_or_else(|| Error::TypeMismatch(format!("'{s}' is not a timestamp")))?;
            Ok(XExpr::literal(XLit::Timestamp(t as i64)))
        }
        _ => Ok(x),
    }
}

/// `l op r` with string constants read as dates/timestamps against those types.
fn compare(op: CmpOp, l: XExpr, r: XExpr) -> Result<XExpr> {
    let (lt, rt) = (l.data_type(), r.data_type());
    XExpr::compare(op, coerce_literal(&rt, l)?, coerce_literal(&lt, r)?)
}

/// The Arrow type of a SQL / ClickHouse type name in CAST.
fn arrow_type(t: &ast::DataType) -> Result<DataType> {
    let name = t.to_string().to_ascii_lowercase();
    Ok(match name.as_str() {
        "tinyint" | "int8" => DataType::Int8,
        "smallint" | "int16" => DataType::Int16,
        "int" | "integer" | "int32" => DataType::Int32,
        "bigint" | "int64" => DataType::Int64,
        "uint8" | "utinyint" => DataType::UInt8,
        "uint16" | "usmallint" => DataType::UInt16,
        "uint32" | "uinteger" => DataType::UInt32,
        "uint64" | "ubigint" => DataType::UInt64,
        "real" | "float" | "float32" | "float4" => DataType::Float32,
        "double" | "double precision" | "float64" | "float8" => DataType::Float64,
        "varchar" | "text" | "string" | "char" => DataType::Utf8,
        "date" | "date32" => DataType::Date32,
        "timestamp" | "datetime" => DataType::Timestamp(arrow::datatypes::TimeUnit::Second, None),
        _ => return Err(Error::not_implemented(format!("CAST to {t}"))),
    })
}

#[derive(Debug, Clone)]
enum Lit {
    Int(i128),
    Float(f64),
    Str(String),
}

/// The operands of a chain of one associative operator (`a OR b OR c`, any nesting and
/// parentheses), left to right. Iterative: the parser builds a left-deep tree as deep as
/// the chain is long (thousands of `OR`s from generated SQL), which recursion would follow
/// into a stack overflow; the plan gets one flat `Or`/`And`.
fn chain<'e>(e: &'e Expr, op: &BinaryOperator) -> Vec<&'e Expr> {
    let mut terms = Vec::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        let mut x = x;
        while let Expr::Nested(inner) = x {
            x = inner;
        }
        match x {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                stack.push(right);
                stack.push(left);
            }
            other => terms.push(other),
        }
    }
    terms
}

/// A LIKE pattern written with escape character `esc` (`LIKE .. ESCAPE '!'`) rewritten
/// with `\` escapes, the form [`XExpr::like`] takes: `esc` + a character is that character
/// taken literally, and a backslash that is not the escape is a literal backslash. An empty
/// `esc` means no escape character (PostgreSQL, DuckDB).
fn with_backslash_escapes(pattern: &str, esc: &str) -> Result<String> {
    let mut chars = esc.chars();
    let esc = match (chars.next(), chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => return Err(Error::InvalidArgument(format!("LIKE ... ESCAPE '{esc}': the escape must be one character"))),
    };
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        if Some(c) == esc {
            match it.next() {
                Some(lit) => {
                    out.push('\\');
                    out.push(lit);
                }
                None => {
                    return Err(Error::Parse(format!("LIKE pattern '{pattern}' ends with its escape character ({c})")));
                }
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// `Some` if `e` is a literal (`Some(Err)` when it is one we cannot read).
fn literal(e: &Expr) -> Option<Result<Lit>> {
    match e {
        Expr::Nested(inner) => literal(inner),
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => literal(expr).map(|l| {
            l.and_then(|l| match l {
                Lit::Int(i) => Ok(Lit::Int(-i)),
                Lit::Float(f) => Ok(Lit::Float(-f)),
                Lit::Str(_) => Err(Error::plan("unary minus on a string")),
            })
        }),
        Expr::Value(v) => Some(match &v.value {
            ast::Value::Number(n, _) => n
                .parse::<i128>()
                .map(Lit::Int)
                .or_else(|_| n.parse::<f64>().map(Lit::Float))
                .map_err(|_| Error::Parse(format!("bad number {n}"))),
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Ok(Lit::Str(s.clone())),
            other => Err(Error::not_implemented(format!("literal {other}"))),
        }),
        Expr::TypedString(ts) => Some(match &ts.value.value {
            ast::Value::SingleQuotedString(s) => Ok(Lit::Str(s.clone())),
            other => Err(Error::not_implemented(format!("literal {other}"))),
        }),
        _ => None,
    }
}

fn parse_date(s: &str) -> Option<i128> {
    let d = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some((d - epoch).num_days() as i128)
}

fn parse_timestamp(s: &str) -> Option<i128> {
    let s = s.trim();
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S") {
        return Some(t.and_utc().timestamp() as i128);
    }
    parse_date(s).map(|d| d * 86_400)
}

fn agg_func(lower: &str) -> Option<AggFunc> {
    AggFunc::from_name(lower)
}

fn plain_args(f: &ast::Function) -> Result<Vec<&FunctionArgExpr>> {
    match &f.args {
        FunctionArguments::None => Ok(vec![]),
        FunctionArguments::List(l) => {
            if !l.clauses.is_empty() {
                return Err(Error::not_implemented(format!("clauses in {}", f)));
            }
            l.args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(x) => Ok(x),
                    other => Err(Error::not_implemented(format!("named argument {other}"))),
                })
                .collect()
        }
        FunctionArguments::Subquery(_) => Err(Error::not_implemented("subquery argument")),
    }
}

/// The parameters of a ClickHouse parametric aggregate call (`quantile(0.9)` in
/// `quantile(0.9)(x)`), as expressions.
fn plain_params(f: &ast::Function) -> Result<Vec<&Expr>> {
    match &f.parameters {
        FunctionArguments::None => Ok(vec![]),
        FunctionArguments::List(l) => l
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Ok(x),
                other => Err(Error::not_implemented(format!("parameter {other}"))),
            })
            .collect(),
        FunctionArguments::Subquery(_) => Err(Error::not_implemented("subquery parameter")),
    }
}

fn usize_literal(e: &Expr, what: &str) -> Result<usize> {
    match literal(e) {
        Some(Ok(Lit::Int(i))) if i >= 0 => usize::try_from(i).map_err(|_| Error::plan(format!("{what} {i} too large"))),
        _ => Err(Error::plan(format!("{what} must be a non-negative integer, got {e}"))),
    }
}

mod query;

use query::plan_query;
