//! AST to plan.

use std::sync::Arc;

use arrow::datatypes::DataType;
use sqlparser::ast::{
    self, BinaryOperator, DateTimeField, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    LimitClause, ObjectName, OrderByKind, OrderBySort, SelectItem, SetExpr, TableFactor, UnaryOperator,
};
use tessera_common::{Error, Result, Table};
use tessera_exec::{
    AggExpr, AggFunc, AggOutput, AggregatePlan, CmpOp, LikePattern, OrderLimit, Plan, Predicate, ScalarExpr, ScanPlan, SortKey,
    Value,
};

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
}

struct Ctx<'a> {
    table: &'a Arc<Table>,
    /// `FROM t AS alias`.
    alias: Option<String>,
}

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

    /// A scalar (non-aggregate) expression.
    fn scalar(&self, e: &Expr) -> Result<ScalarExpr> {
        match e {
            Expr::Identifier(i) => Ok(ScalarExpr::Column(self.column(&i.value)?)),
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
                Ok(ScalarExpr::Column(self.column(&column.value)?))
            }
            Expr::Nested(inner) => self.scalar(inner),
            Expr::Extract { field: DateTimeField::Minute, expr, .. } => self.minute(expr),
            Expr::Function(f) => {
                let name = object_name(&f.name).to_ascii_lowercase();
                if name == "tominute" || name == "minute" {
                    let args = plain_args(f)?;
                    match args.as_slice() {
                        [FunctionArgExpr::Expr(a)] => self.minute(a),
                        _ => Err(Error::plan(format!("{name} takes one argument"))),
                    }
                } else if agg_func(&name).is_some() {
                    Err(Error::plan(format!("aggregate {e} is not allowed here")))
                } else {
                    Err(Error::not_implemented(format!("function {}", object_name(&f.name))))
                }
            }
            Expr::Extract { field, .. } => Err(Error::not_implemented(format!("extract({field} FROM ..)"))),
            other => Err(Error::not_implemented(format!("expression {other}"))),
        }
    }

    fn minute(&self, e: &Expr) -> Result<ScalarExpr> {
        match self.scalar(e)? {
            ScalarExpr::Column(c) if matches!(self.dtype(c), DataType::Timestamp(_, _)) => Ok(ScalarExpr::Minute(c)),
            ScalarExpr::Column(c) => Err(Error::TypeMismatch(format!(
                "minute of {} which is {}, not a timestamp",
                self.table.schema().field(c).name(),
                self.dtype(c)
            ))),
            _ => Err(Error::not_implemented(format!("minute of {e}"))),
        }
    }

    /// A SELECT/ORDER BY expression: scalar or aggregate.
    fn item(&self, e: &Expr) -> Result<Item> {
        if let Expr::Function(f) = e {
            let name = object_name(&f.name).to_ascii_lowercase();
            if let Some(func) = agg_func(&name) {
                if let FunctionArguments::List(l) = &f.args
                    && l.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct) {
                        return Err(Error::not_implemented(format!("{}(DISTINCT ..)", name.to_uppercase())));
                    }
                if f.filter.is_some() || f.over.is_some() {
                    return Err(Error::not_implemented(format!("{e}")));
                }
                let args = plain_args(f)?;
                return match (func, args.as_slice()) {
                    (AggFunc::Count, [FunctionArgExpr::Wildcard]) | (AggFunc::Count, []) => {
                        Ok(Item::Agg(AggExpr { func: AggFunc::CountStar, input: None }))
                    }
                    (_, [FunctionArgExpr::Expr(a)]) => match self.scalar(a)? {
                        ScalarExpr::Column(c) => {
                            let dt = self.dtype(c);
                            let numeric = dt.is_numeric() || dt.is_temporal();
                            if matches!(func, AggFunc::Sum | AggFunc::Avg) && !dt.is_numeric() {
                                return Err(Error::TypeMismatch(format!("{} of {} column", name.to_uppercase(), dt)));
                            }
                            if matches!(func, AggFunc::Min | AggFunc::Max) && !numeric {
                                return Err(Error::not_implemented(format!("{} over {}", name.to_uppercase(), dt)));
                            }
                            Ok(Item::Agg(AggExpr { func, input: Some(c) }))
                        }
                        _ => Err(Error::not_implemented(format!("aggregate of an expression: {e}"))),
                    },
                    _ => Err(Error::plan(format!("{} takes one argument", name.to_uppercase()))),
                };
            }
        }
        Ok(Item::Scalar(self.scalar(e)?))
    }

    fn predicate(&self, e: &Expr) -> Result<Predicate> {
        match e {
            Expr::Nested(inner) => self.predicate(inner),
            Expr::UnaryOp { op: UnaryOperator::Not, expr } => Ok(Predicate::Not(Box::new(self.predicate(expr)?))),
            Expr::BinaryOp { op: BinaryOperator::And, .. } => {
                Ok(Predicate::And(chain(e, &BinaryOperator::And).into_iter().map(|t| self.predicate(t)).collect::<Result<_>>()?))
            }
            Expr::BinaryOp { op: BinaryOperator::Or, .. } => {
                Ok(Predicate::Or(chain(e, &BinaryOperator::Or).into_iter().map(|t| self.predicate(t)).collect::<Result<_>>()?))
            }
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::NotEq,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::LtEq,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::GtEq => CmpOp::GtEq,
                    other => return Err(Error::not_implemented(format!("operator {other} in WHERE"))),
                };
                match (literal(left), literal(right)) {
                    (None, None) => {
                        let (l, r) = (self.column_operand(left)?, self.column_operand(right)?);
                        if self.dtype(l) != self.dtype(r) {
                            return Err(Error::TypeMismatch(format!(
                                "cannot compare {} ({}) with {} ({})",
                                left,
                                self.dtype(l),
                                right,
                                self.dtype(r)
                            )));
                        }
                        Ok(Predicate::CmpColumns { left: l, op, right: r })
                    }
                    (None, Some(lit)) => self.cmp_literal(left, op, lit?),
                    (Some(lit), None) => self.cmp_literal(right, op.flip(), lit?),
                    (Some(_), Some(_)) => Err(Error::not_implemented(format!("comparison of two literals: {e}"))),
                }
            }
            Expr::Like { negated, any: false, expr, pattern, escape_char: None } => {
                let column = self.column_operand(expr)?;
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
                let pattern = LikePattern::parse(&text).ok_or_else(|| {
                    Error::not_implemented(format!("LIKE pattern '{text}' (supported: 'text', 'text%', '%text', '%text%')"))
                })?;
                let p = Predicate::Like { column, pattern };
                Ok(if *negated { Predicate::Not(Box::new(p)) } else { p })
            }
            Expr::Like { .. } | Expr::ILike { .. } => Err(Error::not_implemented("ILIKE / LIKE ANY / LIKE ... ESCAPE")),
            Expr::IsNull(_) | Expr::IsNotNull(_) => Err(Error::not_implemented("IS [NOT] NULL")),
            Expr::Between { .. } => Err(Error::not_implemented("BETWEEN")),
            other => Err(Error::not_implemented(format!("WHERE condition {other}"))),
        }
    }

    fn column_operand(&self, e: &Expr) -> Result<usize> {
        match self.scalar(e)? {
            ScalarExpr::Column(c) => Ok(c),
            _ => Err(Error::not_implemented(format!("comparison on expression {e}"))),
        }
    }

    fn cmp_literal(&self, col_expr: &Expr, op: CmpOp, lit: Lit) -> Result<Predicate> {
        let column = self.column_operand(col_expr)?;
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
    Some(match lower {
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "avg" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        _ => return None,
    })
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

fn usize_literal(e: &Expr, what: &str) -> Result<usize> {
    match literal(e) {
        Some(Ok(Lit::Int(i))) if i >= 0 => usize::try_from(i).map_err(|_| Error::plan(format!("{what} {i} too large"))),
        _ => Err(Error::plan(format!("{what} must be a non-negative integer, got {e}"))),
    }
}

fn plan_query(q: &ast::Query, catalog: &dyn Fn(&str) -> Option<Arc<Table>>) -> Result<Statement> {
    if q.with.is_some() {
        return Err(Error::not_implemented("WITH"));
    }
    if q.fetch.is_some() || !q.locks.is_empty() || q.for_clause.is_some() || q.format_clause.is_some() {
        return Err(Error::not_implemented("FETCH/FOR/FORMAT clauses"));
    }
    let select = match q.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::Query(_) => return Err(Error::not_implemented("subquery")),
        other => return Err(Error::not_implemented(format!("set operation {}", first_words(&other.to_string())))),
    };
    if select.distinct.is_some() {
        return Err(Error::not_implemented("SELECT DISTINCT"));
    }
    if select.having.is_some() {
        return Err(Error::not_implemented("HAVING"));
    }
    if select.top.is_some() || select.into.is_some() || select.prewhere.is_some() || select.qualify.is_some() {
        return Err(Error::not_implemented("TOP/INTO/PREWHERE/QUALIFY"));
    }
    let (table, alias) = match select.from.as_slice() {
        [t] if t.joins.is_empty() => match &t.relation {
            TableFactor::Table { name, args: None, alias, .. } => {
                if let Some(a) = alias {
                    check_alias(&a.name)?;
                }
                let n = object_name(name);
                (catalog(&n).ok_or(Error::UnknownTable(n))?, alias.as_ref().map(|a| a.name.value.clone()))
            }
            _ => return Err(Error::not_implemented("FROM other than a table name")),
        },
        [] => return Err(Error::not_implemented("SELECT without FROM")),
        _ => return Err(Error::not_implemented("joins")),
    };
    let ctx = Ctx { table: &table, alias };

    // SELECT list.
    let mut items: Vec<(String, Item, Option<String>)> = Vec::new(); // (name, item, alias)
    for si in &select.projection {
        match si {
            SelectItem::UnnamedExpr(e) => items.push((e.to_string(), ctx.item(e)?, None)),
            SelectItem::ExprWithAlias { expr, alias } => {
                check_alias(alias)?;
                items.push((alias.value.clone(), ctx.item(expr)?, Some(alias.value.clone())))
            }
            SelectItem::Wildcard(opts) => {
                if opts.opt_exclude.is_some() || opts.opt_except.is_some() || opts.opt_replace.is_some() {
                    return Err(Error::not_implemented("SELECT * with modifiers"));
                }
                for (i, f) in table.schema().fields().iter().enumerate() {
                    items.push((f.name().clone(), Item::Scalar(ScalarExpr::Column(i)), None));
                }
            }
            other => return Err(Error::not_implemented(format!("select item {other}"))),
        }
    }
    if items.is_empty() {
        return Err(Error::Parse("SELECT needs at least one expression (the SELECT list is empty)".into()));
    }
    let filter = select.selection.as_ref().map(|w| ctx.predicate(w)).transpose()?;

    // GROUP BY.
    let mut keys: Vec<ScalarExpr> = Vec::new();
    match &select.group_by {
        GroupByExpr::All(_) => return Err(Error::not_implemented("GROUP BY ALL")),
        GroupByExpr::Expressions(exprs, mods) => {
            if !mods.is_empty() {
                return Err(Error::not_implemented("GROUP BY modifiers (ROLLUP/CUBE/TOTALS)"));
            }
            for e in exprs {
                let key = if let Some(Ok(Lit::Int(_))) = literal(e) {
                    let pos = usize_literal(e, "GROUP BY position")?;
                    match items.get(pos.wrapping_sub(1)) {
                        Some((_, Item::Scalar(s), _)) => *s,
                        Some((n, Item::Agg(_), _)) => {
                            return Err(Error::plan(format!("GROUP BY {pos} refers to aggregate {n}")));
                        }
                        None => return Err(Error::plan(format!("GROUP BY position {pos} is out of range"))),
                    }
                } else {
                    match ctx.scalar(e) {
                        Ok(s) => s,
                        Err(err @ Error::UnknownColumn { .. }) => match (e, alias_item(&items, e)) {
                            (_, Some(Item::Scalar(s))) => s,
                            (_, Some(Item::Agg(_))) => return Err(Error::plan(format!("GROUP BY {e} refers to an aggregate"))),
                            _ => return Err(err),
                        },
                        Err(err) => return Err(err),
                    }
                };
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    let has_agg = items.iter().any(|(_, i, _)| matches!(i, Item::Agg(_)));
    let order_exprs: Vec<&ast::OrderByExpr> = match &q.order_by {
        None => vec![],
        Some(ob) => match &ob.kind {
            OrderByKind::Expressions(v) => v.iter().collect(),
            OrderByKind::All(_) => return Err(Error::not_implemented("ORDER BY ALL")),
        },
    };
    let (limit, offset) = match &q.limit_clause {
        None => (None, 0),
        Some(LimitClause::LimitOffset { limit, offset, limit_by }) => {
            if !limit_by.is_empty() {
                return Err(Error::not_implemented("LIMIT BY"));
            }
            (
                limit.as_ref().map(|l| usize_literal(l, "LIMIT")).transpose()?,
                offset.as_ref().map(|o| usize_literal(&o.value, "OFFSET")).transpose()?.unwrap_or(0),
            )
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(usize_literal(limit, "LIMIT")?), usize_literal(offset, "OFFSET")?)
        }
    };
    let settings = q
        .settings
        .iter()
        .flatten()
        .map(|s| Ok((s.key.value.clone(), setting_value(&s.value)?)))
        .collect::<Result<Vec<_>>>()?;

    let order_has_agg = order_exprs
        .iter()
        .any(|o| matches!(ctx.item(&o.expr), Ok(Item::Agg(_))));
    let plan = if has_agg || !keys.is_empty() || order_has_agg {
        let mut aggs: Vec<AggExpr> = Vec::new();
        let mut output: Vec<(String, AggOutput)> = Vec::new();
        let add = |item: &Item, name: &str, aggs: &mut Vec<AggExpr>, output: &mut Vec<(String, AggOutput)>| -> Result<usize> {
            let src = match item {
                Item::Agg(a) => AggOutput::Agg(aggs.iter().position(|x| x == a).unwrap_or_else(|| {
                    aggs.push(*a);
                    aggs.len() - 1
                })),
                Item::Scalar(s) => AggOutput::Key(keys.iter().position(|k| k == s).ok_or_else(|| {
                    Error::plan(format!("{name} must appear in GROUP BY or be used in an aggregate function"))
                })?),
            };
            output.push((name.to_string(), src));
            Ok(output.len() - 1)
        };
        for (name, item, _) in &items {
            add(item, name, &mut aggs, &mut output)?;
        }
        let visible = output.len();
        let mut order_by = Vec::new();
        for o in &order_exprs {
            let out = resolve_order(&ctx, &o.expr, &items, visible, |item, name| {
                // An existing output with the same source, else a hidden one.
                let probe = match item {
                    Item::Agg(a) => aggs.iter().position(|x| x == a).map(AggOutput::Agg),
                    Item::Scalar(s) => keys.iter().position(|k| k == s).map(AggOutput::Key),
                };
                if let Some(src) = probe
                    && let Some(i) = output.iter().position(|(_, s)| *s == src) {
                        return Ok(i);
                    }
                add(item, name, &mut aggs, &mut output)
            })?;
            order_by.push(sort_key(o, out)?);
        }
        Plan::Aggregate(AggregatePlan {
            table: table.clone(),
            filter,
            keys,
            aggs,
            output,
            visible,
            order: OrderLimit { order_by, limit, offset },
        })
    } else {
        let mut output: Vec<(String, ScalarExpr)> = items
            .iter()
            .map(|(n, i, _)| match i {
                Item::Scalar(s) => (n.clone(), *s),
                Item::Agg(_) => unreachable!("no aggregates on this path"),
            })
            .collect();
        let visible = output.len();
        let mut order_by = Vec::new();
        for o in &order_exprs {
            let out = resolve_order(&ctx, &o.expr, &items, visible, |item, name| match item {
                Item::Scalar(s) => Ok(output.iter().position(|(_, x)| x == s).unwrap_or_else(|| {
                    output.push((name.to_string(), *s));
                    output.len() - 1
                })),
                Item::Agg(_) => Err(Error::internal("aggregate in scan ORDER BY")),
            })?;
            order_by.push(sort_key(o, out)?);
        }
        Plan::Scan(ScanPlan { table: table.clone(), filter, output, visible, order: OrderLimit { order_by, limit, offset } })
    };
    Ok(Statement::Query { plan, settings })
}

/// Refuses an unquoted alias that is a reserved word of a SELECT's clauses: the parser
/// takes `SELECT c BY FROM t` or `FROM t NOT WHERE ..` as aliases `BY` and `NOT`, which
/// hides a typo (DuckDB and ClickHouse reject both). Quoted (`"by"`) they are fine.
fn check_alias(alias: &ast::Ident) -> Result<()> {
    const RESERVED: &[&str] = &[
        "AND", "AS", "BY", "FROM", "GROUP", "HAVING", "LIMIT", "NOT", "OFFSET", "OR", "ORDER", "SELECT", "SETTINGS",
        "UNION", "WHERE",
    ];
    if alias.quote_style.is_none() && RESERVED.iter().any(|r| r.eq_ignore_ascii_case(&alias.value)) {
        return Err(Error::Parse(format!("syntax error near {}: a reserved word cannot be an alias", alias.value)));
    }
    Ok(())
}

/// The SELECT item whose alias is the identifier `e`.
fn alias_item(items: &[(String, Item, Option<String>)], e: &Expr) -> Option<Item> {
    let Expr::Identifier(id) = e else { return None };
    items
        .iter()
        .find(|(_, _, a)| a.as_ref().is_some_and(|a| a.eq_ignore_ascii_case(&id.value)))
        .map(|(_, i, _)| i.clone())
}

/// Resolves an ORDER BY expression to an output column index: position, output alias,
/// or an expression (found among outputs or added hidden by `add`).
fn resolve_order(
    ctx: &Ctx<'_>,
    e: &Expr,
    items: &[(String, Item, Option<String>)],
    visible: usize,
    mut add: impl FnMut(&Item, &str) -> Result<usize>,
) -> Result<usize> {
    if let Some(Ok(Lit::Int(_))) = literal(e) {
        let pos = usize_literal(e, "ORDER BY position")?;
        if pos == 0 || pos > visible {
            return Err(Error::plan(format!("ORDER BY position {pos} is out of range 1..{visible}")));
        }
        return Ok(pos - 1);
    }
    if let Expr::Identifier(id) = e
        && let Some(i) = items.iter().position(|(_, _, a)| a.as_ref().is_some_and(|a| a.eq_ignore_ascii_case(&id.value))) {
            return Ok(i);
        }
    let item = ctx.item(e)?;
    add(&item, &e.to_string())
}

fn sort_key(o: &ast::OrderByExpr, output: usize) -> Result<SortKey> {
    if o.with_fill.is_some() {
        return Err(Error::not_implemented("ORDER BY .. WITH FILL"));
    }
    let descending = match &o.options.sort {
        None | Some(OrderBySort::Asc) => false,
        Some(OrderBySort::Desc) => true,
        Some(other) => return Err(Error::not_implemented(format!("ORDER BY {other:?}"))),
    };
    Ok(SortKey { output, descending, nulls_first: o.options.nulls_first.unwrap_or(false) })
}
