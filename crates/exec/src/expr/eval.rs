//! The vectorized evaluator of [`Expr`](super::Expr) over one morsel.

use super::*;

/// An evaluated operand: a full column or a constant (one row, broadcast by the kernels).
#[derive(Debug, Clone)]
enum Val {
    Array(ArrayRef),
    Scalar(ArrayRef),
}

impl Val {
    fn array(&self) -> &ArrayRef {
        match self {
            Val::Array(a) | Val::Scalar(a) => a,
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Val::Scalar(_))
    }

    fn datum(&self) -> Box<dyn Datum> {
        match self {
            Val::Array(a) => Box::new(a.clone()),
            Val::Scalar(a) => Box::new(Scalar::new(a.clone())),
        }
    }

    /// Same shape (column or constant) as `self`, with `f` applied to the values.
    fn map(&self, f: impl FnOnce(&ArrayRef) -> Result<ArrayRef>) -> Result<Val> {
        Ok(match self {
            Val::Array(a) => Val::Array(f(a)?),
            Val::Scalar(a) => Val::Scalar(f(a)?),
        })
    }

    /// `CAST`: between integer types it wraps as ClickHouse's does (`CAST(255 AS Int8)` is
    /// -1, `(number % 256)::Int8` cycles through -128..127); other casts are Arrow's, where a
    /// value that does not convert is an error.
    fn cast(&self, to: &DataType) -> Result<Val> {
        let from = self.array().data_type();
        if from == to {
            return Ok(self.clone());
        }
        if from.is_integer() && to.is_integer() {
            return self.map(|a| wrapping_int_cast(a, to));
        }
        if from.is_integer() && *to == DataType::Utf8 {
            return self.map(int_to_utf8);
        }
        let opts = CastOptions { safe: false, ..Default::default() };
        self.map(|a| Ok(cast_with_options(a, to, &opts)?))
    }

    /// [`Val::cast`], except that `UInt64` to `Int64` reinterprets the bits (ClickHouse's
    /// wrapping integer arithmetic: `toUInt64(-1) - 0` is -1) instead of failing.
    fn cast_wrapping(&self, to: &DataType) -> Result<Val> {
        if *to == DataType::Int64 && *self.array().data_type() == DataType::UInt64 {
            return self.map(|a| Ok(Arc::new(a.as_primitive::<UInt64Type>().unary::<_, Int64Type>(|v| v as i64)) as ArrayRef));
        }
        self.cast(to)
    }

    /// A column of `len` rows.
    fn into_array(self, len: usize) -> Result<ArrayRef> {
        match self {
            Val::Array(a) => Ok(a),
            Val::Scalar(a) if a.is_null(0) => Ok(new_null_array(a.data_type(), len)),
            Val::Scalar(a) => Ok(arrow::compute::take(&a, &UInt32Array::from_value(0, len), None)?),
        }
    }
}

/// `CAST(int AS String)` / `toString(int)`: the decimal digits of each value written
/// straight into the string column's buffer, the text Arrow's cast gives, without its
/// per-value formatter dispatch. NULLs stay NULL.
fn int_to_utf8(a: &ArrayRef) -> Result<ArrayRef> {
    fn digits<T: ArrowPrimitiveType>(a: &ArrayRef) -> Result<ArrayRef>
    where
        T::Native: Into<i128>,
    {
        let p = a.as_primitive::<T>();
        // At most 20 bytes a value (`-9223372036854775808`, `18446744073709551615`): only
        // arrays of more than 107M values (all groups of a GROUP BY) need the check.
        let check = p.len().saturating_mul(20) > i32::MAX as usize;
        let mut values: Vec<u8> = Vec::with_capacity(p.len() * 8);
        let mut offsets: Vec<i32> = Vec::with_capacity(p.len() + 1);
        offsets.push(0);
        let nulls = p.nulls().filter(|n| n.null_count() > 0);
        for (i, &v) in p.values().iter().enumerate() {
            if nulls.is_none_or(|n| n.is_valid(i)) {
                let v: i128 = v.into();
                if v < 0 {
                    values.push(b'-');
                }
                // Every integer type's magnitude fits a u64 (|i64::MIN| = 2^63).
                tessera_common::bytes::push_decimal_u64(&mut values, v.unsigned_abs() as u64);
            }
            if check && values.len() > i32::MAX as usize {
                return Err(Error::InvalidArgument("toString: more than 2 GiB of text in one array".into()));
            }
            offsets.push(values.len() as i32);
        }
        let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
        // SAFETY: the offsets start at 0, never decrease and end at `values.len()` (pushed
        // after each value); the values are ASCII digits and `-`, valid UTF-8 at any cut.
        Ok(Arc::new(unsafe { arrow::array::StringArray::new_unchecked(offsets, values.into(), p.nulls().cloned()) }))
    }
    tessera_common::integer_dispatch!(a.data_type(), A => digits::<A>(a),
        _ => Err(Error::internal(format!("int_to_utf8 of {}", a.data_type()))))
}

/// Builds a result of the shape of `(a, b)`: a constant when both are.
fn shape(a: &Val, b: &Val, out: ArrayRef) -> Val {
    if a.is_scalar() && b.is_scalar() { Val::Scalar(out) } else { Val::Array(out) }
}

fn arrow_err(e: ArrowError) -> Error {
    match e {
        ArrowError::DivideByZero => Error::InvalidArgument("division by zero".into()),
        other => other.into(),
    }
}

/// Evaluates `expr` over one morsel of `len` rows whose columns are `cols[column index]`
/// (`None` for columns the expression does not read). Returns an array of `len` rows of
/// type [`Expr::data_type`]; NULL handling as in the module docs.
///
/// # Errors
/// [`Error::InvalidArgument`] for an integer division by zero; [`Error::Overflow`] or
/// [`Error::TypeMismatch`] for a CAST whose value does not fit; [`Error::Internal`] if a
/// column the expression reads is missing or of another type than planned (a bug).
pub fn evaluate(expr: &Expr, cols: &[Option<ArrayRef>], len: usize) -> Result<ArrayRef> {
    eval(expr, cols, len)?.into_array(len)
}

fn eval(expr: &Expr, cols: &[Option<ArrayRef>], len: usize) -> Result<Val> {
    Ok(match expr {
        Expr::Column { index, dtype } => {
            let a = cols
                .get(*index)
                .and_then(|c| c.as_ref())
                .ok_or_else(|| Error::internal(format!("expression column {index} not loaded")))?;
            if a.data_type() != dtype || a.len() != len {
                return Err(Error::internal(format!("expression column {index}: {} rows of {}, planned {len} of {dtype}", a.len(), a.data_type())));
            }
            Val::Array(a.clone())
        }
        Expr::Literal(l) => Val::Scalar(l.to_array()),
        Expr::Cast { expr, to } => match &**expr {
            // An integer `%` or `intDiv` cast to an integer type in one pass (the seed's
            // `(number % 256)::Int8`: no 8-byte intermediate column).
            Expr::Arith { op, left, right, dtype } if to.is_integer() && dtype.is_integer() => {
                eval_arith(*op, left, right, dtype, to, cols, len)?
            }
            _ => eval(expr, cols, len)?.cast(to)?,
        },
        Expr::Arith { op, left, right, dtype } => eval_arith(*op, left, right, dtype, dtype, cols, len)?,
        Expr::Cmp { op, left, right, common } => {
            let l = canonical(eval(left, cols, len)?.cast(common)?);
            let r = canonical(eval(right, cols, len)?.cast(common)?);
            let (ld, rd) = (l.datum(), r.datum());
            let out = match op {
                CmpOp::Eq => cmp::eq(&*ld, &*rd),
                CmpOp::NotEq => cmp::neq(&*ld, &*rd),
                CmpOp::Lt => cmp::lt(&*ld, &*rd),
                CmpOp::LtEq => cmp::lt_eq(&*ld, &*rd),
                CmpOp::Gt => cmp::gt(&*ld, &*rd),
                CmpOp::GtEq => cmp::gt_eq(&*ld, &*rd),
            }?;
            shape(&l, &r, Arc::new(out))
        }
        Expr::And(terms) | Expr::Or(terms) => {
            let and = matches!(expr, Expr::And(_));
            let mut acc: Option<BooleanArray> = None;
            for t in terms {
                let v = eval(t, cols, len)?.cast(&DataType::Boolean)?.into_array(len)?;
                let v = v.as_boolean().clone();
                acc = Some(match acc {
                    None => v,
                    Some(a) if and => boolean::and_kleene(&a, &v)?,
                    Some(a) => boolean::or_kleene(&a, &v)?,
                });
            }
            Val::Array(Arc::new(acc.unwrap_or_else(|| BooleanArray::from(vec![and; len]))))
        }
        Expr::Not(e) => eval(e, cols, len)?.cast(&DataType::Boolean)?.map(|a| Ok(Arc::new(boolean::not(a.as_boolean())?) as ArrayRef))?,
        Expr::IsNull { expr, negated } => eval(expr, cols, len)?.map(|a| {
            let n = if *negated { boolean::is_not_null(a)? } else { boolean::is_null(a)? };
            Ok(Arc::new(n) as ArrayRef)
        })?,
        Expr::Case { branches, otherwise, dtype } => {
            let mut acc = eval(otherwise, cols, len)?.cast(dtype)?;
            for (cond, value) in branches.iter().rev() {
                let c = eval(cond, cols, len)?.cast(&DataType::Boolean)?.into_array(len)?;
                let mask = true_mask(c.as_boolean());
                let v = eval(value, cols, len)?.cast(dtype)?;
                let out = arrow::compute::kernels::zip::zip(&mask, &*v.datum(), &*acc.datum())?;
                acc = Val::Array(out);
            }
            acc
        }
        Expr::Like { expr, pattern, negated, case_insensitive } => {
            let v = eval(expr, cols, len)?.cast(&DataType::Utf8)?;
            let p = Scalar::new(StringArray::from(vec![pattern.as_str()]));
            let d = v.datum();
            let out = match (negated, case_insensitive) {
                (false, false) => comparison::like(&*d, &p),
                (true, false) => comparison::nlike(&*d, &p),
                (false, true) => comparison::ilike(&*d, &p),
                (true, true) => comparison::nilike(&*d, &p),
            }?;
            v.map(|_| Ok(Arc::new(out) as ArrayRef))?
        }
        Expr::Func { func, args, dtype } => eval_func(func, args, dtype, cols, len)?,
    })
}

/// `left op right` of type `dtype` (the operands cast to it), cast to `to` (`dtype`
/// itself, or an integer type when `dtype` is one: the cast of [`Val::cast`]). An integer
/// division or remainder by a constant power of two writes `to` directly.
#[allow(clippy::too_many_arguments)]
fn eval_arith(op: ArithOp, left: &Expr, right: &Expr, dtype: &DataType, to: &DataType, cols: &[Option<ArrayRef>], len: usize) -> Result<Val> {
    let l = eval(left, cols, len)?.cast_wrapping(dtype)?;
    let r = eval(right, cols, len)?.cast_wrapping(dtype)?;
    if matches!(op, ArithOp::IntDiv | ArithOp::Rem | ArithOp::Div)
        && !is_float(dtype)
        && let Some(out) = int_div_pow2(&l, &r, op == ArithOp::Rem, to)
    {
        return Ok(Val::Array(out));
    }
    let (ld, rd) = (l.datum(), r.datum());
    let float = is_float(dtype);
    let out = match op {
        ArithOp::Add if float => numeric::add(&*ld, &*rd),
        ArithOp::Add => numeric::add_wrapping(&*ld, &*rd),
        ArithOp::Sub if float => numeric::sub(&*ld, &*rd),
        ArithOp::Sub => numeric::sub_wrapping(&*ld, &*rd),
        ArithOp::Mul if float => numeric::mul(&*ld, &*rd),
        ArithOp::Mul => numeric::mul_wrapping(&*ld, &*rd),
        ArithOp::Div | ArithOp::Rem if float => {
            if op == ArithOp::Div { numeric::div(&*ld, &*rd) } else { numeric::rem(&*ld, &*rd) }
        }
        ArithOp::Div | ArithOp::IntDiv => int_div(&l, &r, false),
        ArithOp::Rem => int_div(&l, &r, true),
    }
    .map_err(arrow_err)?;
    shape(&l, &r, out).cast(to)
}

/// The rows where `b` is TRUE (NULL counts as not TRUE), without a null buffer.
pub fn true_mask(b: &BooleanArray) -> BooleanArray {
    if b.null_count() > 0 { prep_null_mask_filter(b) } else { BooleanArray::new(b.values().clone(), None) }
}

/// Integer `intDiv` (`rem = false`) or `%`: Arrow's checked kernels, which refuse a zero
/// divisor (and wrap nothing: `i64::MIN / -1` is an overflow error).
fn int_div(l: &Val, r: &Val, rem: bool) -> std::result::Result<ArrayRef, ArrowError> {
    let (ld, rd) = (l.datum(), r.datum());
    if rem { numeric::rem(&*ld, &*rd) } else { numeric::div(&*ld, &*rd) }
}

/// Integer division or remainder of a 64-bit column by a constant power of two `2^k` as a
/// shift or a mask instead of a division per row (the seed's `number % 256`: 4 ns a row ->
/// well under 1), written as the integer type `to` (wrapping, as [`Val::cast`]). Same
/// answers as the division: truncation toward zero, the remainder taking the dividend's
/// sign (ClickHouse's `intDiv` and `%`). `None` for anything else.
fn int_div_pow2(l: &Val, r: &Val, rem: bool, to: &DataType) -> Option<ArrayRef> {
    let (Val::Array(a), Val::Scalar(c)) = (l, r) else { return None };
    if c.is_null(0) {
        return None;
    }
    match (a.data_type(), c.data_type()) {
        (DataType::UInt64, DataType::UInt64) => {
            let d = c.as_primitive::<UInt64Type>().value(0);
            if !d.is_power_of_two() {
                return None;
            }
            let (mask, k) = (d - 1, d.trailing_zeros());
            if rem { unary_wrapping::<UInt64Type>(a, to, |v| v & mask) } else { unary_wrapping::<UInt64Type>(a, to, |v| v >> k) }
        }
        (DataType::Int64, DataType::Int64) => {
            let d = c.as_primitive::<Int64Type>().value(0);
            // 2^63 does not fit; 1 is left to the general path (`x % 1` and `x / 1` are rare).
            if d <= 1 || d.count_ones() != 1 {
                return None;
            }
            let (mask, k) = (d - 1, d.trailing_zeros());
            // Negative dividends are biased by d - 1 so that the arithmetic shift truncates
            // toward zero instead of rounding down.
            let quot = move |v: i64| (v + ((v >> 63) & mask)) >> k;
            if rem {
                unary_wrapping::<Int64Type>(a, to, move |v| (v - (quot(v) << k)) as u64)
            } else {
                unary_wrapping::<Int64Type>(a, to, move |v| quot(v) as u64)
            }
        }
        _ => None,
    }
}

/// Floats in Tessera's order (`-0.0` as `0.0`, one NaN): Arrow compares by `total_cmp`.
fn canonical(v: Val) -> Val {
    match v {
        Val::Array(a) => Val::Array(canonical_array(&a)),
        Val::Scalar(a) => Val::Scalar(canonical_array(&a)),
    }
}

/// Applies `f` to each non-NULL string of a Utf8 or Binary array, keeping the type: `f`
/// appends the output string to the values buffer it is given (no allocation per row).
/// `f`'s second argument says whether the input is `Utf8`.
fn map_strings(a: &ArrayRef, mut f: impl FnMut(&[u8], &mut Vec<u8>, bool)) -> Result<ArrayRef> {
    let (offsets, values, nulls, utf8) = match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            (s.offsets(), s.values(), s.nulls(), true)
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            (s.offsets(), s.values(), s.nulls(), false)
        }
        DataType::Null => return Ok(a.clone()),
        other => return Err(Error::internal(format!("string function on {other}"))),
    };
    let mut out = Vec::with_capacity(values.len());
    let mut out_offsets = Vec::with_capacity(offsets.len());
    out_offsets.push(0i32);
    for (i, w) in offsets.windows(2).enumerate() {
        if nulls.is_none_or(|n| n.is_valid(i)) {
            f(&values[w[0] as usize..w[1] as usize], &mut out, utf8);
        }
        let end = i32::try_from(out.len())
            .map_err(|_| Error::InvalidArgument("a string function's output passes 2 GiB in one morsel".into()))?;
        out_offsets.push(end);
    }
    let offsets = arrow::buffer::OffsetBuffer::new(out_offsets.into());
    let values = arrow::buffer::Buffer::from_vec(out);
    Ok(if utf8 {
        // Valid UTF-8 in, and every function here keeps it valid (ASCII case mapping,
        // regex replacement at character boundaries); checked by the constructor anyway.
        Arc::new(StringArray::try_new(offsets, values, nulls.cloned()).map_err(|e| Error::internal(format!("string function: {e}")))?)
    } else {
        Arc::new(BinaryArray::try_new(offsets, values, nulls.cloned())?)
    })
}

/// The `[start, end)` units of a value of `len` units that `substring(.., offset, length)`
/// takes (ClickHouse's rules, see [`Func::Substring`]).
fn substring_span(len: usize, offset: i64, length: Option<i64>) -> (usize, usize) {
    if offset == 0 {
        return (0, 0);
    }
    let l = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if offset > 0 { offset - 1 } else { l.saturating_add(offset) };
    let end = match length {
        None => l,
        Some(n) if n >= 0 => start.saturating_add(n),
        Some(n) => l.saturating_add(n),
    };
    let s = start.clamp(0, l);
    let e = end.clamp(s, l);
    (s as usize, e as usize)
}

/// (year, month 1..12, day 1..31) of the UTC day holding timestamp `t` (seconds): the
/// proleptic Gregorian calendar by Howard Hinnant's `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html>), exact for every `i64` second.
fn civil_date(t: i64) -> (i64, u32, u32) {
    let z = t.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (month 1..12, day
/// 1..31): the inverse of [`civil_date`], Hinnant's `days_from_civil`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400); // [0, 399]
    let mp = i64::from((month + 9) % 12); // March = 0
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// Monday 1 .. Sunday 7 of day `d` (days since 1970-01-01, a Thursday).
fn iso_weekday(d: i64) -> i64 {
    (d + 3).rem_euclid(7) + 1
}

/// The start of the `unit` holding timestamp `t` (seconds).
fn trunc(t: i64, unit: TruncUnit) -> i64 {
    if let Some(s) = unit.seconds() {
        return t - t.rem_euclid(s);
    }
    let d = t.div_euclid(86_400);
    let start = match unit {
        TruncUnit::Week => d - (iso_weekday(d) - 1),
        TruncUnit::WeekFromSunday => d - iso_weekday(d) % 7,
        _ => {
            let (y, m, _) = civil_date(t);
            match unit {
                TruncUnit::Month => days_from_civil(y, m, 1),
                TruncUnit::Quarter => days_from_civil(y, (m - 1) / 3 * 3 + 1, 1),
                _ => days_from_civil(y, 1, 1),
            }
        }
    };
    start * 86_400
}

/// Timestamp `t` moved by `months` calendar months, the day clipped to the new month's
/// length, the time of day kept. Saturates instead of overflowing.
fn add_months(t: i64, months: i64) -> i64 {
    let (y, m, d) = civil_date(t);
    let total = (y * 12 + i64::from(m) - 1).saturating_add(months);
    let first = |months: i64| days_from_civil(months.div_euclid(12), (months.rem_euclid(12) + 1) as u32, 1);
    // The new month's length: the distance to the next month's first day.
    let len = (first(total.saturating_add(1)) - first(total)) as u32;
    (first(total) + i64::from(d.min(len)) - 1).saturating_mul(86_400).saturating_add(t.rem_euclid(86_400))
}

/// The ISO 8601 week number of day `d`: the week of its Thursday, counted from the week
/// holding that year's first Thursday.
fn iso_week(d: i64) -> u8 {
    let thursday = d - iso_weekday(d) + 4;
    let (y, _, _) = civil_date(thursday * 86_400);
    ((thursday - days_from_civil(y, 1, 1)) / 7 + 1) as u8
}

fn timestamps(a: &ArrayRef) -> Result<&PrimitiveArray<TimestampSecondType>> {
    a.as_primitive_opt::<TimestampSecondType>()
        .ok_or_else(|| Error::internal(format!("timestamp function on {}", a.data_type())))
}

fn eval_func(func: &Func, args: &[Expr], dtype: &DataType, cols: &[Option<ArrayRef>], len: usize) -> Result<Val> {
    let arg = |i: usize| eval(&args[i], cols, len);
    if args.iter().any(|a| a.data_type() == DataType::Null) && !matches!(func, Func::Coalesce | Func::Concat) {
        return Ok(Val::Scalar(new_null_array(dtype, 1)));
    }
    Ok(match func {
        Func::Length => arg(0)?.map(|a| Ok(arrow::compute::cast(&arrow::compute::kernels::length::length(a)?, &DataType::UInt64)?))?,
        Func::Lower => arg(0)?.map(|a| map_strings(a, |s, out, _| out.extend(s.iter().map(u8::to_ascii_lowercase))))?,
        Func::Upper => arg(0)?.map(|a| map_strings(a, |s, out, _| out.extend(s.iter().map(u8::to_ascii_uppercase))))?,
        Func::Concat => {
            let mut vals = Vec::with_capacity(args.len());
            for i in 0..args.len() {
                vals.push(arg(i)?.cast(&DataType::Utf8)?);
            }
            if vals.iter().all(Val::is_scalar) {
                let mut s = String::new();
                for v in &vals {
                    let a = v.array().as_string::<i32>();
                    if a.is_null(0) {
                        return Ok(Val::Scalar(new_null_array(&DataType::Utf8, 1)));
                    }
                    s.push_str(a.value(0));
                }
                Val::Scalar(Arc::new(StringArray::from(vec![s])))
            } else {
                let mut acc = vals[0].clone().into_array(len)?;
                for v in &vals[1..] {
                    let b = v.clone().into_array(len)?;
                    acc = Arc::new(arrow::compute::kernels::concat_elements::concat_elements_utf8(
                        acc.as_string::<i32>(),
                        b.as_string::<i32>(),
                    )?);
                }
                Val::Array(acc)
            }
        }
        Func::Substring { offset, length } => arg(0)?.map(|a| {
            map_strings(a, |v, out, utf8| {
                if !utf8 || v.is_ascii() {
                    let (s, e) = substring_span(v.len(), *offset, *length);
                    out.extend_from_slice(&v[s..e]);
                } else {
                    // Characters: the span in characters, then its byte bounds.
                    let text = std::str::from_utf8(v).expect("a UTF-8 array holds valid UTF-8");
                    let (s, e) = substring_span(text.chars().count(), *offset, *length);
                    let mut bounds = text.char_indices().map(|(b, _)| b).chain([v.len()]);
                    let start = bounds.nth(s).unwrap_or(v.len());
                    let end = if e == s { start } else { bounds.nth(e - s - 1).unwrap_or(v.len()) };
                    out.extend_from_slice(&v[start..end]);
                }
            })
        })?,
        Func::RegexpReplace { pattern, replacement, all } => arg(0)?.map(|a| {
            // One search state per evaluation: this morsel's thread owns its caches.
            let mut search = pattern.searching(*a.data_type() == DataType::Utf8);
            map_strings(a, |v, out, _| search.replace(v, replacement, *all, out))
        })?,
        Func::Match(pattern) => arg(0)?.map(|a| {
            let out: BooleanArray = match a.data_type() {
                DataType::Utf8 => {
                    let mut search = pattern.searching(true);
                    a.as_string::<i32>().iter().map(|v| v.map(|v| search.is_match(v.as_bytes()))).collect()
                }
                _ => {
                    let mut search = pattern.searching(false);
                    a.as_binary::<i32>().iter().map(|v| v.map(|v| search.is_match(v))).collect()
                }
            };
            Ok(Arc::new(out) as ArrayRef)
        })?,
        Func::Trunc(unit) => arg(0)?.map(|a| {
            let t = timestamps(a)?;
            Ok(Arc::new(t.unary::<_, TimestampSecondType>(|v| trunc(v, *unit))) as ArrayRef)
        })?,
        Func::AddMonths(months) => arg(0)?.map(|a| {
            let t = timestamps(a)?;
            Ok(Arc::new(t.unary::<_, TimestampSecondType>(|v| add_months(v, *months))) as ArrayRef)
        })?,
        Func::Part(part) => arg(0)?.map(|a| {
            let t = timestamps(a)?;
            let out: ArrayRef = match part {
                DatePart::Second => Arc::new(t.unary::<_, UInt8Type>(|v| v.rem_euclid(60) as u8)),
                DatePart::Minute => Arc::new(t.unary::<_, UInt8Type>(|v| (v.rem_euclid(3600) / 60) as u8)),
                DatePart::Hour => Arc::new(t.unary::<_, UInt8Type>(|v| (v.rem_euclid(86_400) / 3600) as u8)),
                DatePart::Day => Arc::new(t.unary::<_, UInt8Type>(|v| civil_date(v).2 as u8)),
                DatePart::Month => Arc::new(t.unary::<_, UInt8Type>(|v| civil_date(v).1 as u8)),
                // Years past 65535 wrap as ClickHouse's UInt16 would.
                DatePart::Year => Arc::new(t.unary::<_, UInt16Type>(|v| civil_date(v).0 as u16)),
                DatePart::Quarter => Arc::new(t.unary::<_, UInt8Type>(|v| ((civil_date(v).1 - 1) / 3 + 1) as u8)),
                DatePart::DayOfWeek => Arc::new(t.unary::<_, UInt8Type>(|v| iso_weekday(v.div_euclid(86_400)) as u8)),
                DatePart::DayOfYear => Arc::new(t.unary::<_, UInt16Type>(|v| {
                    let d = v.div_euclid(86_400);
                    (d - days_from_civil(civil_date(v).0, 1, 1) + 1) as u16
                })),
                DatePart::IsoWeek => Arc::new(t.unary::<_, UInt8Type>(|v| iso_week(v.div_euclid(86_400)))),
            };
            Ok(out)
        })?,
        Func::ToDate => arg(0)?.map(|a| {
            let t = timestamps(a)?;
            Ok(Arc::new(t.unary::<_, Date32Type>(|v| v.div_euclid(86_400) as i32)) as ArrayRef)
        })?,
        Func::Coalesce => {
            let mut acc = arg(args.len() - 1)?.cast(dtype)?;
            for i in (0..args.len() - 1).rev() {
                let v = arg(i)?.cast(dtype)?;
                let present = v.clone().into_array(len)?;
                let mask = boolean::is_not_null(&present)?;
                acc = Val::Array(arrow::compute::kernels::zip::zip(&mask, &present, &*acc.datum())?);
            }
            acc
        }
    })
}

/// Integer `a` as integer type `to`, keeping the low bits (two's complement), as
/// ClickHouse's CAST between integer types does. One pass from each source type to each
/// target type ([`unary_wrapping`]).
fn wrapping_int_cast(a: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    tessera_common::integer_dispatch!(a.data_type(),
        A => unary_wrapping::<A>(a, to, |v| i128::from(v) as u64)
            .ok_or_else(|| Error::internal(format!("integer cast to {to}"))),
        _ => Err(Error::internal(format!("integer cast from {}", a.data_type()))))
}

/// `f` of each value of integer array `a` (of type `I`), the low bits of its 64 kept as the
/// integer type `to` (`as`: truncated, or the same bits); `None` if `to` is no integer type.
fn unary_wrapping<I: ArrowPrimitiveType>(a: &ArrayRef, to: &DataType, f: impl Fn(I::Native) -> u64) -> Option<ArrayRef> {
    use arrow::datatypes::*;
    let a = a.as_primitive::<I>();
    Some(match to {
        DataType::Int8 => Arc::new(a.unary::<_, Int8Type>(|v| f(v) as i8)),
        DataType::Int16 => Arc::new(a.unary::<_, Int16Type>(|v| f(v) as i16)),
        DataType::Int32 => Arc::new(a.unary::<_, Int32Type>(|v| f(v) as i32)),
        DataType::Int64 => Arc::new(a.unary::<_, Int64Type>(|v| f(v) as i64)),
        DataType::UInt8 => Arc::new(a.unary::<_, UInt8Type>(|v| f(v) as u8)),
        DataType::UInt16 => Arc::new(a.unary::<_, UInt16Type>(|v| f(v) as u16)),
        DataType::UInt32 => Arc::new(a.unary::<_, UInt32Type>(|v| f(v) as u32)),
        DataType::UInt64 => Arc::new(a.unary::<_, UInt64Type>(f)),
        _ => return None,
    })
}
