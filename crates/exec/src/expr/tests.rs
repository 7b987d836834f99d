use super::*;

fn col(i: usize, a: &ArrayRef) -> Expr {
    Expr::column(i, a.data_type().clone())
}

fn run(e: &Expr, cols: &[ArrayRef]) -> Result<ArrayRef> {
    let len = cols.first().map_or(1, |c| c.len());
    let cols: Vec<Option<ArrayRef>> = cols.iter().cloned().map(Some).collect();
    evaluate(e, &cols, len)
}

fn lit_u(v: u64) -> Expr {
    Expr::literal(Literal::UInt(v))
}

#[test]
fn arithmetic_types_nulls_and_wrapping() {
    let a: ArrayRef = Arc::new(Int32Array::from(vec![Some(i32::MAX), None, Some(-5), Some(0)]));
    let e = Expr::arith(ArithOp::Add, col(0, &a), lit_u(1)).unwrap();
    assert_eq!(e.data_type(), DataType::Int64);
    let out = run(&e, &[a.clone()]).unwrap();
    let out = out.as_primitive::<Int64Type>();
    assert_eq!(out.value(0), i32::MAX as i64 + 1, "widened, no overflow");
    assert!(out.is_null(1));
    assert_eq!(out.value(2), -4);
    // Sub of unsigned is signed; UInt64 wraps like ClickHouse.
    let u: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 0]));
    let e = Expr::arith(ArithOp::Add, col(0, &u), lit_u(1)).unwrap();
    assert_eq!(e.data_type(), DataType::UInt64);
    assert_eq!(run(&e, &[u.clone()]).unwrap().as_primitive::<UInt64Type>().values(), &[0, 1]);
    let e = Expr::arith(ArithOp::Sub, lit_u(0), col(0, &u)).unwrap();
    assert_eq!(e.data_type(), DataType::Int64);
    assert_eq!(run(&e, &[u]).unwrap().as_primitive::<Int64Type>().values(), &[1, 0]);
}

#[test]
fn division_follows_clickhouse() {
    let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(0), Some(-7), None]));
    let z: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), Some(0), Some(2), Some(0)]));
    let e = Expr::arith(ArithOp::Div, col(0, &a), col(1, &z)).unwrap();
    let out = run(&e, &[a.clone(), z.clone()]).unwrap();
    let out = out.as_primitive::<Float64Type>();
    assert_eq!(out.value(0), f64::INFINITY);
    assert!(out.value(1).is_nan());
    assert_eq!(out.value(2), -3.5);
    assert!(out.is_null(3));
    let e = Expr::arith(ArithOp::IntDiv, col(0, &a), col(1, &z)).unwrap();
    assert!(matches!(run(&e, &[a.clone(), z.clone()]), Err(Error::InvalidArgument(m)) if m.contains("division by zero")));
    let e = Expr::arith(ArithOp::Rem, col(0, &a), col(1, &z)).unwrap();
    assert!(matches!(run(&e, &[a.clone(), z]), Err(Error::InvalidArgument(_))));
    let two: ArrayRef = Arc::new(Int64Array::from(vec![2, 2, 2, 2]));
    let e = Expr::function("intDiv", vec![col(0, &a), col(1, &two)]).unwrap();
    let out = run(&e, &[a.clone(), two.clone()]).unwrap();
    assert_eq!(out.as_primitive::<Int64Type>().value(2), -3, "truncates toward zero");
    let e = Expr::arith(ArithOp::Rem, col(0, &a), col(1, &two)).unwrap();
    assert_eq!(run(&e, &[a, two]).unwrap().as_primitive::<Int64Type>().value(2), -1);
    let s: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    assert!(matches!(Expr::arith(ArithOp::Add, col(0, &s), lit_u(1)), Err(Error::TypeMismatch(_))));
}

#[test]
fn comparisons_three_valued_and_float_order() {
    let f: ArrayRef = Arc::new(Float64Array::from(vec![Some(-0.0), Some(f64::NAN), None, Some(1.0)]));
    let e = Expr::compare(CmpOp::Eq, col(0, &f), Expr::literal(Literal::UInt(0))).unwrap();
    let out = run(&e, &[f.clone()]).unwrap();
    let out = out.as_boolean();
    assert!(out.value(0), "-0.0 = 0");
    assert!(!out.value(1));
    assert!(out.is_null(2));
    let e = Expr::compare(CmpOp::Gt, col(0, &f), Expr::literal(Literal::Float(f64::INFINITY))).unwrap();
    assert!(run(&e, &[f.clone()]).unwrap().as_boolean().value(1), "NaN above +inf");
    // Mixed signedness compares exactly.
    let i: ArrayRef = Arc::new(Int64Array::from(vec![-1, 5]));
    let u: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 5]));
    let e = Expr::compare(CmpOp::Lt, col(0, &i), col(1, &u)).unwrap();
    let out = run(&e, &[i, u]).unwrap();
    assert_eq!(out.as_boolean().iter().collect::<Vec<_>>(), vec![Some(true), Some(false)]);
    let s: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    assert!(matches!(Expr::compare(CmpOp::Eq, col(0, &s), lit_u(1)), Err(Error::TypeMismatch(_))));
}

#[test]
fn kleene_logic_in_list_and_is_null() {
    let a: ArrayRef = Arc::new(Int16Array::from(vec![Some(-1), Some(6), Some(3), None]));
    let e = Expr::in_list(col(0, &a), vec![Expr::literal(Literal::Int(-1)), lit_u(6)], false).unwrap();
    let out = run(&e, &[a.clone()]).unwrap();
    assert_eq!(out.as_boolean().iter().collect::<Vec<_>>(), vec![Some(true), Some(true), Some(false), None]);
    let e = Expr::in_list(col(0, &a), vec![lit_u(3), Expr::literal(Literal::Null)], true).unwrap();
    let out = run(&e, &[a.clone()]).unwrap();
    assert_eq!(out.as_boolean().iter().collect::<Vec<_>>(), vec![None, None, Some(false), None]);
    let e = Expr::is_null(col(0, &a), false);
    assert_eq!(run(&e, &[a.clone()]).unwrap().as_boolean().iter().collect::<Vec<_>>(), vec![Some(false), Some(false), Some(false), Some(true)]);
    // FALSE AND NULL is FALSE; TRUE OR NULL is TRUE.
    let gt = Expr::compare(CmpOp::Gt, col(0, &a), lit_u(5)).unwrap();
    let e = Expr::and(vec![Expr::literal(Literal::Bool(false)), gt.clone()]).unwrap();
    assert_eq!(run(&e, &[a.clone()]).unwrap().as_boolean().value(3), false);
    assert!(!run(&e, &[a.clone()]).unwrap().is_null(3));
    let e = Expr::or(vec![Expr::literal(Literal::Bool(true)), gt]).unwrap();
    assert!(run(&e, &[a.clone()]).unwrap().as_boolean().value(3));
    assert!(matches!(Expr::and(vec![col(0, &a)]), Err(Error::TypeMismatch(_))));
}

#[test]
fn case_like_and_strings() {
    let s: ArrayRef = Arc::new(StringArray::from(vec![Some("http://www.a.com/x"), Some(""), None, Some("b_c%")]));
    let n: ArrayRef = Arc::new(Int32Array::from(vec![0, 1, 0, 0]));
    let cond = Expr::compare(CmpOp::Eq, col(1, &n), lit_u(0)).unwrap();
    let e = Expr::case(vec![(cond, col(0, &s))], Some(Expr::literal(Literal::Str("-".into())))).unwrap();
    let out = run(&e, &[s.clone(), n.clone()]).unwrap();
    assert_eq!(out.as_string::<i32>().iter().collect::<Vec<_>>(), vec![Some("http://www.a.com/x"), Some("-"), None, Some("b_c%")]);
    let e = Expr::case(vec![(Expr::literal(Literal::Null), col(0, &s))], None).unwrap();
    assert_eq!(run(&e, &[s.clone(), n.clone()]).unwrap().null_count(), 4, "NULL condition is not TRUE, no ELSE is NULL");
    let e = Expr::like(col(0, &s), "b\\_c\\%".into(), false, false).unwrap();
    assert_eq!(run(&e, &[s.clone()]).unwrap().as_boolean().iter().collect::<Vec<_>>(), vec![Some(false), Some(false), None, Some(true)]);
    let e = Expr::like(col(0, &s), "%.A.%".into(), false, true).unwrap();
    assert!(run(&e, &[s.clone()]).unwrap().as_boolean().value(0));
    let e = Expr::function("length", vec![col(0, &s)]).unwrap();
    let out = run(&e, &[s.clone()]).unwrap();
    assert_eq!(out.as_primitive::<UInt64Type>().iter().collect::<Vec<_>>(), vec![Some(18), Some(0), None, Some(4)]);
    let e = Expr::function(
        "REGEXP_REPLACE",
        vec![col(0, &s), Expr::literal(Literal::Str(r"^https?://(?:www\.)?([^/]+)/.*$".into())), Expr::literal(Literal::Str(r"\1".into()))],
    )
    .unwrap();
    let out = run(&e, &[s.clone()]).unwrap();
    assert_eq!(out.as_string::<i32>().iter().collect::<Vec<_>>(), vec![Some("a.com"), Some(""), None, Some("b_c%")]);
    let bad = Expr::function("regexp_replace", vec![col(0, &s), Expr::literal(Literal::Str("(".into())), Expr::literal(Literal::Str("".into()))]);
    assert!(matches!(bad, Err(Error::InvalidArgument(_))));
    assert!(matches!(Expr::function("nosuchfn", vec![]), Err(Error::NotImplemented(_))));
    assert!(matches!(Expr::function("length", vec![col(1, &n)]), Err(Error::TypeMismatch(_))));
    let e = Expr::function("concat", vec![col(0, &s), Expr::literal(Literal::Str("!".into()))]).unwrap();
    assert_eq!(run(&e, &[s.clone()]).unwrap().as_string::<i32>().value(1), "!");
    let e = Expr::function("upper", vec![col(0, &s)]).unwrap();
    assert_eq!(run(&e, &[s]).unwrap().as_string::<i32>().value(0), "HTTP://WWW.A.COM/X");
}

#[test]
fn time_functions() {
    // 1970-01-01 00:00:00 - 1 s, and 2013-07-15 10:47:31.
    let t: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(-1), Some(1_373_885_251), None]));
    let e = Expr::function("date_trunc", vec![Expr::literal(Literal::Str("minute".into())), col(0, &t)]).unwrap();
    let out = run(&e, &[t.clone()]).unwrap();
    let out = out.as_primitive::<TimestampSecondType>();
    assert_eq!(out.value(0), -60);
    assert_eq!(out.value(1), 1_373_885_220);
    assert!(out.is_null(2));
    let e = Expr::function("toHour", vec![col(0, &t)]).unwrap();
    assert_eq!(run(&e, &[t.clone()]).unwrap().as_primitive::<UInt8Type>().value(0), 23);
    let e = Expr::function("toDate", vec![col(0, &t)]).unwrap();
    assert_eq!(run(&e, &[t.clone()]).unwrap().as_primitive::<Date32Type>().value(0), -1);
    assert!(matches!(
        Expr::function("date_trunc", vec![Expr::literal(Literal::Str("fortnight".into())), col(0, &t)]),
        Err(Error::InvalidArgument(_))
    ));
    let e = Expr::function("coalesce", vec![col(0, &t), Expr::literal(Literal::Timestamp(7))]).unwrap();
    assert_eq!(run(&e, &[t]).unwrap().as_primitive::<TimestampSecondType>().value(2), 7);
}

#[test]
fn constants_fold_to_one_row_and_broadcast() {
    let e = Expr::arith(ArithOp::Mul, lit_u(6), lit_u(7)).unwrap();
    let out = evaluate(&e, &[], 3).unwrap();
    assert_eq!(out.as_primitive::<UInt64Type>().values(), &[42, 42, 42]);
    let e = Expr::arith(ArithOp::Add, Expr::literal(Literal::Null), lit_u(1)).unwrap();
    assert_eq!(evaluate(&e, &[], 2).unwrap().null_count(), 2);
}

/// `toString` of every integer type equals Arrow's cast (the reference it replaced): the
/// extremes, zero, negatives, NULLs, a sliced input.
#[test]
fn int_to_string_equals_arrow_cast() {
    use arrow::compute::cast;
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(Int8Array::from(vec![Some(i8::MIN), Some(-1), None, Some(0), Some(i8::MAX)])),
        Arc::new(Int16Array::from(vec![Some(i16::MIN), None, Some(7), Some(i16::MAX)])),
        Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(-10), Some(100), None, Some(i32::MAX)])),
        Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(-1), Some(0), None, Some(i64::MAX)])),
        Arc::new(UInt8Array::from(vec![Some(0), Some(u8::MAX), None])),
        Arc::new(UInt16Array::from(vec![None, Some(0), Some(u16::MAX)])),
        Arc::new(UInt32Array::from(vec![Some(0), Some(u32::MAX), Some(42)])),
        Arc::new(UInt64Array::from(vec![Some(0), None, Some(u64::MAX), Some(1 << 63)])),
        Arc::new(Int64Array::from((-5000..5000).map(|v| if v % 7 == 0 { None } else { Some(v * 9973) }).collect::<Vec<_>>()).slice(3, 9000)),
    ];
    for a in arrays {
        let e = Expr::cast(col(0, &a), DataType::Utf8).unwrap();
        let got = run(&e, &[a.clone()]).unwrap();
        let want = cast(&a, &DataType::Utf8).unwrap();
        assert_eq!(got.as_string::<i32>(), want.as_string::<i32>(), "{}", a.data_type());
    }
}

/// `substring` as ClickHouse 26.9 (chDB) answers, bytes for ASCII and binary values,
/// characters (`substringUTF8`) for non-ASCII UTF-8 strings; NULL stays NULL.
#[test]
fn substring_follows_clickhouse() {
    let cases: &[(&str, i64, Option<i64>, &str)] = &[
        ("hello", 2, None, "ello"),
        ("hello", 2, Some(2), "el"),
        ("hello", 0, Some(2), ""),
        ("hello", -2, None, "lo"),
        ("hello", -2, Some(1), "l"),
        ("hello", 2, Some(-1), "ell"),
        ("hello", 10, None, ""),
        ("hello", 1, Some(0), ""),
        ("hello", -10, Some(7), "he"),
        ("hello", 3, Some(100), "llo"),
        ("hello", -10, Some(2), ""),
        ("hello", 2, Some(-3), "e"),
        ("hello", -3, Some(-1), "ll"),
        ("hello", 5, Some(-1), ""),
        ("hello", i64::MAX, Some(2), ""),
        ("hello", -i64::MAX, Some(i64::MAX), "hello"),
        ("", 1, Some(2), ""),
        ("héllo wörld", 2, Some(3), "éll"),
        ("héllo wörld", -4, None, "örld"),
        ("héllo", -10, Some(3), ""),
        ("日本語テキスト", 3, Some(-2), "語テキ"),
    ];
    for &(s, offset, length, want) in cases {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some(s), None]));
        let mut args = vec![col(0, &a), Expr::literal(if offset < 0 { Literal::Int(offset) } else { Literal::UInt(offset as u64) })];
        if let Some(n) = length {
            args.push(Expr::literal(if n < 0 { Literal::Int(n) } else { Literal::UInt(n as u64) }));
        }
        let e = Expr::function("substring", args).unwrap();
        let out = run(&e, &[a]).unwrap();
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), want, "substring({s:?}, {offset}, {length:?})");
        assert!(out.is_null(1));
    }
    // Binary values count bytes (ClickHouse's substring): a cut inside a character is kept.
    let b: ArrayRef = Arc::new(BinaryArray::from(vec![&b"h\xc3\xa9llo"[..]]));
    let e = Expr::function("substr", vec![col(0, &b), lit_u(2), lit_u(1)]).unwrap();
    assert_eq!(run(&e, &[b]).unwrap().as_binary::<i32>().value(0), b"\xc3");
    // A constant expression is evaluated once: substring('hello', 1 + 1) = 'ello'.
    let h: ArrayRef = Arc::new(StringArray::from(vec!["hello"]));
    let two = Expr::arith(ArithOp::Add, lit_u(1), lit_u(1)).unwrap();
    let e = Expr::function("substring", vec![col(0, &h), two]).unwrap();
    assert_eq!(run(&e, &[h]).unwrap().as_string::<i32>().value(0), "ello");
    // NULL offset: NULL; a column offset is refused at plan time.
    let a: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
    let e = Expr::function("substring", vec![col(0, &a), Expr::literal(Literal::Null)]).unwrap();
    assert_eq!(e.data_type(), DataType::Null);
    let i: ArrayRef = Arc::new(Int64Array::from(vec![1]));
    assert!(matches!(Expr::function("substring", vec![col(0, &a), col(1, &i)]), Err(Error::Plan(_))));
    assert!(matches!(Expr::function("substring", vec![col(0, &a)]), Err(Error::Plan(_))));
}

/// `%` and `intDiv` by a constant power of two (shift and mask) equal Rust's truncating
/// division, for signed and unsigned values at the edges; other divisors divide.
#[test]
fn division_by_powers_of_two_truncates() {
    let signed = vec![i64::MIN, i64::MIN + 1, -257, -256, -255, -3, -2, -1, 0, 1, 2, 3, 255, 256, 257, i64::MAX];
    let unsigned = vec![0, 1, 2, 3, 255, 256, 257, u64::MAX - 1, u64::MAX];
    let a: ArrayRef = Arc::new(Int64Array::from(signed.clone()));
    let u: ArrayRef = Arc::new(UInt64Array::from(unsigned.clone()));
    for d in [2u64, 4, 256, 1 << 40, 1 << 62, 3, 1000] {
        for (op, rem) in [(ArithOp::Rem, true), (ArithOp::IntDiv, false)] {
            // Int64 operands (a UInt64 constant with a signed column is cast to Int64).
            let e = Expr::Arith { op, left: Box::new(col(0, &a)), right: Box::new(lit_u(d)), dtype: DataType::Int64 };
            let out = run(&e, &[a.clone()]).unwrap();
            let want: Vec<i64> = signed.iter().map(|&v| if rem { v.wrapping_rem(d as i64) } else { v.wrapping_div(d as i64) }).collect();
            assert_eq!(out.as_primitive::<Int64Type>().values().to_vec(), want, "Int64 {op:?} {d}");
            let e = Expr::arith(op, col(0, &u), lit_u(d)).unwrap();
            let out = run(&e, &[u.clone()]).unwrap();
            let want: Vec<u64> = unsigned.iter().map(|&v| if rem { v % d } else { v / d }).collect();
            assert_eq!(out.as_primitive::<UInt64Type>().values().to_vec(), want, "UInt64 {op:?} {d}");
            // Cast to each integer type in the same pass (`(number % 256)::Int8`): the
            // values of the division's column cast on its own.
            for (i, c) in [&a, &u].into_iter().enumerate() {
                let div = if i == 0 {
                    Expr::Arith { op, left: Box::new(col(0, c)), right: Box::new(lit_u(d)), dtype: DataType::Int64 }
                } else {
                    Expr::arith(op, col(0, c), lit_u(d)).unwrap()
                };
                let whole = run(&div, &[c.clone()]).unwrap();
                for to in [DataType::Int8, DataType::Int16, DataType::Int32, DataType::Int64, DataType::UInt8, DataType::UInt16, DataType::UInt32, DataType::UInt64] {
                    let fused = run(&Expr::Cast { expr: Box::new(div.clone()), to: to.clone() }, &[c.clone()]).unwrap();
                    let apart = run(&Expr::Cast { expr: Box::new(col(0, &whole)), to: to.clone() }, &[whole.clone()]).unwrap();
                    assert_eq!(fused.data_type(), &to);
                    assert_eq!(fused.as_ref(), apart.as_ref(), "{} {op:?} {d} as {to}", c.data_type());
                }
            }
        }
    }
    // NULLs stay NULL; division by zero still fails.
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![Some(7), None]));
    let out = run(&Expr::arith(ArithOp::Rem, col(0, &n), lit_u(4)).unwrap(), &[n.clone()]).unwrap();
    assert_eq!(out.as_primitive::<UInt64Type>().value(0), 3);
    assert!(out.is_null(1));
    assert!(run(&Expr::arith(ArithOp::Rem, col(0, &n), lit_u(0)).unwrap(), &[n]).is_err());
}

/// `toYear` / `toMonth` / `toDayOfMonth` (and `extract`) equal chrono's calendar on every
/// day from year -2000 to 6000 and at the ends of the `i64` seconds, before and after
/// midnight.
#[test]
fn date_parts_follow_the_gregorian_calendar() {
    use chrono::{Datelike, NaiveDate};
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    let mut ts = Vec::new();
    let mut want = Vec::new();
    for day in -1_450_000i64..1_470_000 {
        let d = epoch + chrono::Duration::days(day);
        for s in [0, 86_399] {
            ts.push(day * 86_400 + s);
            want.push((d.year() as u16, d.month() as u8, d.day() as u8));
        }
    }
    let a: ArrayRef = Arc::new(TimestampSecondArray::from(ts));
    let part = |name: &str| run(&Expr::function(name, vec![col(0, &a)]).unwrap(), &[a.clone()]).unwrap();
    let (y, m, d) = (part("toYear"), part("toMonth"), part("toDayOfMonth"));
    let (y, m, d) = (y.as_primitive::<UInt16Type>(), m.as_primitive::<UInt8Type>(), d.as_primitive::<UInt8Type>());
    for (i, w) in want.iter().enumerate() {
        assert_eq!((y.value(i), m.value(i), d.value(i)), *w, "timestamp {}", a.as_primitive::<TimestampSecondType>().value(i));
    }
    // Far ends: no overflow, still a valid date.
    let ends: ArrayRef = Arc::new(TimestampSecondArray::from(vec![i64::MIN, i64::MAX]));
    for name in ["toYear", "toMonth", "toDayOfMonth"] {
        assert!(run(&Expr::function(name, vec![col(0, &ends)]).unwrap(), &[ends.clone()]).is_ok());
    }
    let m = run(&Expr::function("month", vec![col(0, &ends)]).unwrap(), &[ends.clone()]).unwrap();
    assert!((1..=12).contains(&m.as_primitive::<UInt8Type>().value(1)));
}

/// The calendar functions (`toQuarter`, `toDayOfWeek`, `toDayOfYear`, `toISOWeek`, the
/// `toStartOf*` weeks, months, quarters and years, `DATE_TRUNC` by those units, and
/// `addMonths` / `INTERVAL n MONTH`) equal chrono's calendar on every day from year 1422
/// to 2791, before and after midnight.
#[test]
fn calendar_functions_follow_the_gregorian_calendar() {
    use chrono::{Datelike, Months, NaiveDate, Weekday};
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    let days_of = |d: NaiveDate| (d - epoch).num_days();
    let mut ts = Vec::new();
    let mut dates = Vec::new();
    for day in -200_000i64..300_000 {
        for s in [0, 86_399] {
            ts.push(day * 86_400 + s);
            dates.push(epoch + chrono::Duration::days(day));
        }
    }
    let a: ArrayRef = Arc::new(TimestampSecondArray::from(ts.clone()));
    let eval = |e: Expr| run(&e, &[a.clone()]).unwrap();
    let f = |name: &str| eval(Expr::function(name, vec![col(0, &a)]).unwrap());
    let ints = |out: ArrayRef| -> Vec<i64> {
        let out = arrow::compute::cast(&out, &DataType::Int64).unwrap();
        out.as_primitive::<Int64Type>().values().to_vec()
    };
    let check = |what: &str, got: Vec<i64>, want: &dyn Fn(NaiveDate, i64) -> i64| {
        for (i, (d, t)) in dates.iter().zip(&ts).enumerate() {
            assert_eq!(got[i], want(*d, *t), "{what} of {d} (timestamp {t})");
        }
    };
    check("toQuarter", ints(f("toQuarter")), &|d, _| i64::from(d.month0() / 3 + 1));
    check("toDayOfWeek", ints(f("toDayOfWeek")), &|d, _| i64::from(d.weekday().number_from_monday()));
    check("toDayOfYear", ints(f("toDayOfYear")), &|d, _| i64::from(d.ordinal()));
    check("toISOWeek", ints(f("toISOWeek")), &|d, _| i64::from(d.iso_week().week()));
    // Date-returning starts: days since 1970-01-01.
    let starts: [(&str, &dyn Fn(NaiveDate) -> NaiveDate); 5] = [
        ("toMonday", &|d| d.week(Weekday::Mon).first_day()),
        ("toStartOfWeek", &|d| d.week(Weekday::Sun).first_day()),
        ("toStartOfMonth", &|d| d.with_day(1).unwrap()),
        ("toStartOfQuarter", &|d| NaiveDate::from_ymd_opt(d.year(), d.month0() / 3 * 3 + 1, 1).unwrap()),
        ("toStartOfYear", &|d| NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap()),
    ];
    for (name, start) in starts {
        let out = f(name);
        assert_eq!(out.data_type(), &DataType::Date32, "{name}");
        check(name, ints(out), &|d, _| days_of(start(d)));
    }
    let monday_mode = Expr::function("toStartOfWeek", vec![col(0, &a), lit_u(1)]).unwrap();
    check("toStartOfWeek(t, 1)", ints(eval(monday_mode)), &|d, _| days_of(d.week(Weekday::Mon).first_day()));
    // DATE_TRUNC by calendar units: timestamps at the unit's first midnight.
    for (unit, name) in [("week", "toMonday"), ("month", "toStartOfMonth"), ("quarter", "toStartOfQuarter"), ("year", "toStartOfYear")] {
        let e = Expr::function("date_trunc", vec![Expr::literal(Literal::Str(unit.into())), col(0, &a)]).unwrap();
        let want = ints(f(name));
        let got = ints(eval(e));
        for i in 0..ts.len() {
            assert_eq!(got[i], want[i] * 86_400, "date_trunc('{unit}') of timestamp {}", ts[i]);
        }
    }
    // Months: the day clipped to the new month's length, the time of day kept.
    for n in [-1200i64, -25, -1, 1, 2, 13, 1200] {
        let e = Expr::add_interval(col(0, &a), n, IntervalUnit::Month).unwrap();
        check(&format!("+ INTERVAL {n} MONTH"), ints(eval(e)), &|d, t| {
            let m = Months::new(n.unsigned_abs() as u32);
            let moved = if n < 0 { d.checked_sub_months(m) } else { d.checked_add_months(m) }.unwrap();
            days_of(moved) * 86_400 + t.rem_euclid(86_400)
        });
    }
}

/// `INTERVAL` arithmetic and ClickHouse's `addDays` / `subtractMonths` / ... types and
/// values as ClickHouse answers them (chDB 26.9).
#[test]
fn interval_arithmetic() {
    // 2020-01-31 is day 18292; 2020-01-31 10:00:00 is 1580464800.
    let d: ArrayRef = Arc::new(Date32Array::from(vec![Some(18292), None]));
    let t: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(1_580_464_800), None]));
    let value = |e: Expr, cols: &[ArrayRef]| -> (DataType, Vec<Option<i64>>) {
        let out = run(&e, cols).unwrap();
        let dt = out.data_type().clone();
        let out = arrow::compute::cast(&out, &DataType::Int64).unwrap();
        (dt, out.as_primitive::<Int64Type>().iter().collect())
    };
    let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Second, None);
    // A date stays a date by whole days ...
    let e = Expr::add_interval(col(0, &d), 2, IntervalUnit::Week).unwrap();
    assert_eq!(value(e, &[d.clone()]), (DataType::Date32, vec![Some(18306), None]));
    // ... and by months (2020-01-31 + 1 month = 2020-02-29, a leap year) ...
    let e = Expr::function("addMonths", vec![col(0, &d), lit_u(1)]).unwrap();
    assert_eq!(value(e, &[d.clone()]), (DataType::Date32, vec![Some(18321), None]));
    // ... and becomes a timestamp by hours (midnight UTC + 3 h).
    let e = Expr::add_interval(col(0, &d), 3, IntervalUnit::Hour).unwrap();
    assert_eq!(value(e, &[d.clone()]), (ts.clone(), vec![Some(18292 * 86_400 + 3 * 3600), None]));
    // Timestamps: seconds, and months keeping the time of day (2019-01-31 10:00:00).
    let e = Expr::function("subtractYears", vec![col(0, &t), lit_u(1)]).unwrap();
    assert_eq!(value(e, &[t.clone()]), (ts.clone(), vec![Some(1_548_928_800), None]));
    let e = Expr::function("subtractMinutes", vec![col(0, &t), lit_u(90)]).unwrap();
    assert_eq!(value(e, &[t.clone()]), (ts, vec![Some(1_580_464_800 - 5400), None]));
    // Errors: a non-temporal operand, a non-constant count, an overflowing count.
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![1u64]));
    assert!(matches!(Expr::add_interval(col(0, &n), 1, IntervalUnit::Day), Err(Error::TypeMismatch(_))));
    assert!(matches!(Expr::function("addDays", vec![col(0, &d), col(0, &n)]), Err(Error::Plan(_))));
    assert!(matches!(Expr::add_interval(col(0, &t), i64::MAX, IntervalUnit::Day), Err(Error::InvalidArgument(_))));
}

/// Date and time arithmetic as ClickHouse answers it (chDB 26.9): days on dates, seconds on
/// timestamps, the distance of two dates or timestamps; other mixes are type errors.
#[test]
fn date_and_time_arithmetic() {
    // 2020-01-02 is day 18263; NULL stays NULL.
    let d: ArrayRef = Arc::new(Date32Array::from(vec![Some(18263), None, Some(1)]));
    let t: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(1_577_923_200), None, Some(10)]));
    let days = |e: Expr, cols: &[ArrayRef]| {
        assert_eq!(e.data_type(), DataType::Date32);
        let out = run(&e, cols).unwrap();
        (0..out.len()).map(|i| out.is_valid(i).then(|| out.as_primitive::<Date32Type>().value(i))).collect::<Vec<_>>()
    };
    assert_eq!(days(Expr::arith(ArithOp::Add, col(0, &d), lit_u(1)).unwrap(), &[d.clone()]), vec![Some(18264), None, Some(2)]);
    assert_eq!(days(Expr::arith(ArithOp::Add, lit_u(30), col(0, &d)).unwrap(), &[d.clone()]), vec![Some(18293), None, Some(31)]);
    assert_eq!(days(Expr::arith(ArithOp::Sub, col(0, &d), lit_u(40)).unwrap(), &[d.clone()]), vec![Some(18223), None, Some(-39)]);
    let diff = Expr::arith(ArithOp::Sub, col(0, &d), Expr::literal(Literal::Date(18232))).unwrap();
    assert_eq!(diff.data_type(), DataType::Int64);
    assert_eq!(run(&diff, &[d.clone()]).unwrap().as_primitive::<Int64Type>().value(0), 31);
    let later = Expr::arith(ArithOp::Add, col(0, &t), lit_u(3600)).unwrap();
    assert_eq!(later.data_type(), t.data_type().clone());
    assert_eq!(run(&later, &[t.clone()]).unwrap().as_primitive::<TimestampSecondType>().value(0), 1_577_926_800);
    let secs = Expr::arith(ArithOp::Sub, col(0, &t), Expr::literal(Literal::Timestamp(1_577_836_790))).unwrap();
    assert_eq!(run(&secs, &[t.clone()]).unwrap().as_primitive::<Int64Type>().value(0), 86_410);
    // A NULL number of days gives NULL, as in ClickHouse.
    let null_days = Expr::arith(ArithOp::Add, col(0, &d), Expr::literal(Literal::Null)).unwrap();
    assert_eq!(days(null_days, &[d.clone()]), vec![None, None, None]);
    for (op, l, r) in [
        (ArithOp::Mul, col(0, &d), lit_u(2)),
        (ArithOp::Sub, lit_u(1), col(0, &d)),
        (ArithOp::Add, col(0, &d), Expr::literal(Literal::Float(1.5))),
        (ArithOp::Sub, col(0, &d), col(1, &t)),
        (ArithOp::Add, col(0, &d), Expr::literal(Literal::Date(1))),
    ] {
        assert!(matches!(Expr::arith(op, l, r), Err(Error::TypeMismatch(_))), "{op:?}");
    }
}
