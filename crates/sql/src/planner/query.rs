//! SELECT statements: the query's shape (scan, aggregation, ORDER BY, LIMIT) planned into a
//! [`Statement`], with the expressions translated by the parent module.

use super::*;

/// Adds every SELECT item that is not an aggregate to the GROUP BY keys (`GROUP BY ALL`,
/// `SELECT DISTINCT`).
fn push_scalar_items(ctx: &Ctx<'_>, keys: &mut Vec<ScalarExpr>, items: &[(String, Item, Option<String>)]) -> Result<()> {
    for (name, item, _) in items {
        if let Item::Scalar(s) = item {
            push_key(ctx, keys, *s, name)?;
        }
    }
    Ok(())
}

/// Adds `key` (named `what` in errors) to the GROUP BY keys unless it is there already.
fn push_key(ctx: &Ctx<'_>, keys: &mut Vec<ScalarExpr>, key: ScalarExpr, what: &str) -> Result<()> {
    let dt = ctx.scalar_type(&key);
    let keyable = dt.is_integer()
        || matches!(
            dt,
            DataType::Float32 | DataType::Float64 | DataType::Date32 | DataType::Timestamp(_, _) | DataType::Utf8 | DataType::Binary
        );
    if !keyable {
        return Err(Error::not_implemented(format!("GROUP BY {what} of type {dt}")));
    }
    if !keys.contains(&key) {
        keys.push(key);
    }
    Ok(())
}

pub(super) fn plan_query(q: &ast::Query, catalog: &dyn Fn(&str) -> Option<Arc<Table>>) -> Result<Statement> {
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
    // SELECT DISTINCT a, b = SELECT a, b .. GROUP BY a, b (as ClickHouse and DuckDB plan it).
    let distinct = match &select.distinct {
        None | Some(ast::Distinct::All) => false,
        Some(ast::Distinct::Distinct) => true,
        Some(ast::Distinct::On(_)) => return Err(Error::not_implemented("SELECT DISTINCT ON")),
    };
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
            TableFactor::Table { name, args: Some(args), alias, .. } => {
                if let Some(a) = alias {
                    check_alias(&a.name)?;
                }
                let n = object_name(name);
                let t = crate::numbers::table_function(&n, &args.args)
                    .unwrap_or_else(|| Err(Error::not_implemented(format!("table function {n}"))))?;
                (t, alias.as_ref().map(|a| a.name.value.clone()))
            }
            _ => return Err(Error::not_implemented("FROM other than a table name")),
        },
        [] => (crate::numbers::one()?, None),
        _ => return Err(Error::not_implemented("joins")),
    };
    let ctx = Ctx { table: &table, alias, computed: RefCell::new(Vec::new()) };

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
        // ClickHouse's and DuckDB's GROUP BY ALL: every SELECT item that is not an aggregate.
        GroupByExpr::All(mods) => {
            if !mods.is_empty() {
                return Err(Error::not_implemented("GROUP BY modifiers (ROLLUP/CUBE/TOTALS)"));
            }
            push_scalar_items(&ctx, &mut keys, &items)?;
        }
        GroupByExpr::Expressions(exprs, mods) => {
            if !mods.is_empty() {
                return Err(Error::not_implemented("GROUP BY modifiers (ROLLUP/CUBE/TOTALS)"));
            }
            for e in exprs {
                let key = if let Some(Ok(Lit::Int(_))) = literal(e) {
                    let pos = usize_literal(e, "GROUP BY position")?;
                    match items.get(pos.wrapping_sub(1)) {
                        Some((_, Item::Scalar(s), _)) => *s,
                        Some((n, Item::Agg(_) | Item::Post { .. }, _)) => {
                            return Err(Error::plan(format!("GROUP BY {pos} refers to aggregate {n}")));
                        }
                        None => return Err(Error::plan(format!("GROUP BY position {pos} is out of range"))),
                    }
                } else {
                    match ctx.scalar(e) {
                        Ok(s) => s,
                        Err(err @ Error::UnknownColumn { .. }) => match (e, alias_item(&items, e)) {
                            (_, Some(Item::Scalar(s))) => s,
                            (_, Some(Item::Agg(_) | Item::Post { .. })) => return Err(Error::plan(format!("GROUP BY {e} refers to an aggregate"))),
                            _ => return Err(err),
                        },
                        Err(err) => return Err(err),
                    }
                };
                push_key(&ctx, &mut keys, key, &e.to_string())?;
            }
        }
    }
    let has_agg = items.iter().any(|(_, i, _)| matches!(i, Item::Agg(_) | Item::Post { .. }));
    if distinct {
        if has_agg || !keys.is_empty() {
            return Err(Error::not_implemented("SELECT DISTINCT with aggregates or GROUP BY"));
        }
        push_scalar_items(&ctx, &mut keys, &items)?;
    }
    // ORDER BY ALL (ClickHouse, DuckDB): every SELECT item, left to right, in the one
    // direction given.
    let all_positions: Vec<ast::OrderByExpr> = match q.order_by.as_ref().map(|ob| &ob.kind) {
        Some(OrderByKind::All(options)) => (1..=items.len())
            .map(|i| ast::OrderByExpr {
                expr: Expr::value(ast::Value::Number(i.to_string(), false)),
                options: options.clone(),
                with_fill: None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let order_exprs: Vec<&ast::OrderByExpr> = match &q.order_by {
        None => vec![],
        Some(ob) => match &ob.kind {
            OrderByKind::Expressions(v) => v.iter().collect(),
            OrderByKind::All(_) => all_positions.iter().collect(),
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
        .any(|o| matches!(ctx.item(&o.expr), Ok(Item::Agg(_) | Item::Post { .. })));
    let plan = if has_agg || !keys.is_empty() || order_has_agg || select.having.is_some() {
        let (hash_keys, derived) = split_derived_keys(&ctx, keys);
        let mut outs = Outs { ctx: &ctx, keys: &hash_keys, derived, aggs: Vec::new(), output: Vec::new(), pending: Vec::new() };
        for (name, item, _) in &items {
            outs.add(item, name)?;
        }
        let visible = outs.output.len();
        let mut order_by = Vec::new();
        for o in &order_exprs {
            // An existing output with the same source, else a hidden one.
            let out = resolve_order(&ctx, &o.expr, &items, visible, |item, name| outs.find_or_add(item, name))
                .map_err(|e| match e {
                    // ClickHouse runs DISTINCT before such an ORDER BY (and DuckDB takes it
                    // too); Tessera does not order by what the DISTINCT list drops.
                    Error::Plan(m) if distinct && m.contains("must appear in GROUP BY") => Error::not_implemented(format!(
                        "SELECT DISTINCT with ORDER BY {}, which is not in the select list",
                        o.expr
                    )),
                    e => e,
                })?;
            order_by.push(sort_key(o, out)?);
        }
        let having = match &select.having {
            None => None,
            Some(h) => {
                let mut hook = |e: &Expr| -> Result<Option<XExpr>> {
                    if let Expr::Identifier(id) = e
                        && let Some(i) =
                            items.iter().position(|(_, _, a)| a.as_ref().is_some_and(|a| a.eq_ignore_ascii_case(&id.value)))
                    {
                        return Ok(Some(XExpr::column(i, outs.out_type(&ctx, i))));
                    }
                    let item = match e {
                        Expr::Function(f) if agg_func(&object_name(&f.name).to_ascii_lowercase()).is_some() => Some(ctx.item(e)?),
                        _ => ctx
                            .expr(e)
                            .ok()
                            .and_then(|x| ctx.find_scalar(&x))
                            .filter(|s| outs.keys.contains(s) || outs.derived.iter().any(|(d, _, _)| d == s))
                            .map(Item::Scalar),
                    };
                    match item {
                        Some(item) => {
                            let i = outs.find_or_add(&item, &e.to_string())?;
                            Ok(Some(XExpr::column(i, outs.out_type(&ctx, i))))
                        }
                        None if is_column(e) => Err(Error::plan(format!(
                            "{e} in HAVING must appear in GROUP BY or be used in an aggregate function"
                        ))),
                        None => Ok(None),
                    }
                };
                let x = ctx.expr_with(h, &mut hook)?;
                if !matches!(x.data_type(), DataType::Boolean | DataType::Null) {
                    return Err(Error::TypeMismatch(format!("HAVING needs a boolean condition, {h} is {}", x.data_type())));
                }
                Some(x)
            }
        };
        let projections = outs.finish()?;
        let Outs { aggs, output, .. } = outs;
        Plan::Aggregate(AggregatePlan {
            table: table.clone(),
            filter,
            keys: hash_keys,
            computed: ctx.computed.take(),
            aggs,
            projections,
            having,
            output,
            visible,
            order: OrderLimit { order_by, limit, offset },
        })
    } else {
        let mut output: Vec<(String, ScalarExpr)> = items
            .iter()
            .map(|(n, i, _)| match i {
                Item::Scalar(s) => (n.clone(), *s),
                Item::Agg(_) | Item::Post { .. } => unreachable!("no aggregates on this path"),
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
                Item::Agg(_) | Item::Post { .. } => Err(Error::internal("aggregate in scan ORDER BY")),
            })?;
            order_by.push(sort_key(o, out)?);
        }
        Plan::Scan(ScanPlan {
            table: table.clone(),
            filter,
            output,
            computed: ctx.computed.take(),
            visible,
            order: OrderLimit { order_by, limit, offset },
        })
    };
    Ok(Statement::Query { plan, settings })
}

/// Splits GROUP BY keys into the hash keys and the keys that are functions of other keys
/// (columns that are keys themselves) or constants: those need no place in the hash table
/// and are computed per group from the other keys' values (ClickHouse's
/// `optimize_group_by_function_keys`: Q36's `ClientIP - 1`, Q35's `1`). Each derived key
/// comes with its expression over `parts` (`Expr::Column(j)` is `parts[j]`). Constants stay
/// hash keys when no other key remains (a GROUP BY over no rows returns no row).
fn split_derived_keys(ctx: &Ctx<'_>, keys: Vec<ScalarExpr>) -> (Vec<ScalarExpr>, Vec<(ScalarExpr, XExpr, Vec<Item>)>) {
    let mut hash_keys = Vec::new();
    let mut derived = Vec::new();
    for &k in &keys {
        if let ScalarExpr::Computed(i) = k {
            let e = ctx.computed.borrow()[i].clone();
            let mut cols = Vec::new();
            e.columns(&mut cols);
            cols.sort_unstable();
            cols.dedup();
            // Float keys group -0.0 with 0.0 and every NaN together, values a function can
            // tell apart (1 / -0.0 is -inf): only keys whose equality is identity qualify.
            let exact = |c: usize| !matches!(ctx.dtype(c), DataType::Float32 | DataType::Float64);
            if cols.iter().all(|c| keys.contains(&ScalarExpr::Column(*c)) && exact(*c)) {
                let expr = e.map_columns(&|c| cols.iter().position(|x| *x == c).expect("a column of the expression"));
                let parts = cols.iter().map(|c| Item::Scalar(ScalarExpr::Column(*c))).collect();
                derived.push((k, expr, parts));
                continue;
            }
        }
        hash_keys.push(k);
    }
    if hash_keys.is_empty() && !derived.is_empty() {
        return (keys, Vec::new());
    }
    (hash_keys, derived)
}

/// The outputs of an aggregation being planned.
struct Outs<'k> {
    ctx: &'k Ctx<'k>,
    /// The hash keys.
    keys: &'k [ScalarExpr],
    /// Keys computed from other keys: (key, expression over parts, parts).
    derived: Vec<(ScalarExpr, XExpr, Vec<Item>)>,
    aggs: Vec<AggExpr>,
    output: Vec<(String, AggOutput)>,
    /// The projections behind [`AggOutput::Expr`] outputs, over their parts until
    /// [`Outs::finish`] maps the parts to outputs.
    pending: Vec<(XExpr, Vec<Item>)>,
}

impl Outs<'_> {
    /// An existing output of `item`'s key or aggregate.
    fn find(&self, item: &Item) -> Option<usize> {
        let src = match item {
            Item::Agg(a) => AggOutput::Agg(self.aggs.iter().position(|x| x == a)?),
            Item::Scalar(s) => AggOutput::Key(self.keys.iter().position(|k| k == s)?),
            Item::Post { .. } => return None,
        };
        self.output.iter().position(|(_, s)| *s == src)
    }

    /// Adds an output for `item`; returns its index.
    fn add(&mut self, item: &Item, name: &str) -> Result<usize> {
        let src = match item {
            Item::Agg(a) => AggOutput::Agg(match self.aggs.iter().position(|x| x == a) {
                Some(j) => j,
                None => {
                    self.aggs.push(*a);
                    self.aggs.len() - 1
                }
            }),
            Item::Scalar(s) => match self.keys.iter().position(|k| k == s) {
                Some(k) => AggOutput::Key(k),
                None => match self.derived.iter().find(|(d, _, _)| d == s) {
                    Some((_, e, parts)) => {
                        self.pending.push((e.clone(), parts.clone()));
                        AggOutput::Expr(self.pending.len() - 1)
                    }
                    None => match self.over_keys(s) {
                        Some((e, parts)) => {
                            self.pending.push((e, parts));
                            AggOutput::Expr(self.pending.len() - 1)
                        }
                        None => {
                            return Err(Error::plan(format!(
                                "{name} must appear in GROUP BY or be used in an aggregate function"
                            )));
                        }
                    },
                },
            },
            Item::Post { expr, parts } => {
                self.pending.push((expr.clone(), parts.clone()));
                AggOutput::Expr(self.pending.len() - 1)
            }
        };
        self.output.push((name.to_string(), src));
        Ok(self.output.len() - 1)
    }

    /// `s` as an expression over hash keys (`SELECT 1, k ..`, `SELECT k + 1 .. GROUP BY k`),
    /// with its parts, if it is one.
    fn over_keys(&self, s: &ScalarExpr) -> Option<(XExpr, Vec<Item>)> {
        let ScalarExpr::Computed(i) = *s else { return None };
        let e = self.ctx.computed.borrow()[i].clone();
        let mut cols = Vec::new();
        e.columns(&mut cols);
        cols.sort_unstable();
        cols.dedup();
        if !cols.iter().all(|c| self.keys.contains(&ScalarExpr::Column(*c))) {
            return None;
        }
        let expr = e.map_columns(&|c| cols.iter().position(|x| *x == c).expect("a column of the expression"));
        Some((expr, cols.iter().map(|c| Item::Scalar(ScalarExpr::Column(*c))).collect()))
    }

    fn find_or_add(&mut self, item: &Item, name: &str) -> Result<usize> {
        match self.find(item) {
            Some(i) => Ok(i),
            None => self.add(item, name),
        }
    }

    /// The type of output `i`.
    fn out_type(&self, ctx: &Ctx<'_>, i: usize) -> DataType {
        match self.output[i].1 {
            AggOutput::Key(k) => ctx.scalar_type(&self.keys[k]),
            AggOutput::Agg(j) => self.aggs[j].func.output_type(self.aggs[j].input.map(|s| ctx.scalar_type(&s)).as_ref()),
            AggOutput::Expr(p) => self.pending[p].0.data_type(),
        }
    }

    /// The projections over output columns: each part becomes an output (a hidden one
    /// when the query does not select it).
    fn finish(&mut self) -> Result<Vec<XExpr>> {
        let mut out = Vec::with_capacity(self.pending.len());
        for p in 0..self.pending.len() {
            let (e, parts) = self.pending[p].clone();
            let idx = parts
                .iter()
                .enumerate()
                .map(|(j, part)| self.find_or_add(part, &format!("__part{p}_{j}")))
                .collect::<Result<Vec<_>>>()?;
            out.push(e.map_columns(&|j| idx[j]));
        }
        Ok(out)
    }
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
