//! WHERE evaluation: a predicate over one morsel becomes a bitmap, then a selection vector
//! (the row indices that pass, ascending) used by every later step of the pipeline.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::buffer::{BooleanBuffer, Buffer};
use arrow::compute::kernels::cmp;
use arrow::datatypes::*;
use tessera_common::float::canonical_array;
use tessera_common::{ColumnChunks, Error, Result};
use tessera_kernels::scalar::{pack, pack_strings};
use tessera_kernels::{CmpOp, Kernels, SelectInt, cmp_bytes, cmp_scalar};

use crate::plan::{LikePattern, Predicate, Value};

/// Rows of a morsel that pass the filter: `None` means all rows.
pub type Selection = Option<Vec<u32>>;

/// Evaluates `pred` over a morsel of `len` rows whose columns are `cols[table column]`
/// (columns the plan does not read are `None`). Returns the rows where the predicate is
/// TRUE: SQL three-valued logic, so a comparison with NULL is UNKNOWN, `NOT UNKNOWN` is
/// UNKNOWN, and WHERE keeps neither FALSE nor UNKNOWN rows.
///
/// Comparisons of integer and string columns with a constant run on `kern`'s kernel family.
///
/// # Errors
/// [`Error::Internal`] if a column the predicate needs is missing or of an unexpected type
/// (the planner checks types, so this is a bug).
pub fn evaluate(pred: &Predicate, cols: &[Option<ArrayRef>], len: usize, kern: &Kernels) -> Result<BooleanBuffer> {
    Ok(evaluate3(pred, cols, len, kern)?.0)
}

/// Three-valued evaluation: `(is_true, is_known)`; a row is UNKNOWN where `is_known` is
/// unset (then `is_true` is unset too).
fn evaluate3(
    pred: &Predicate,
    cols: &[Option<ArrayRef>],
    len: usize,
    kern: &Kernels,
) -> Result<(BooleanBuffer, BooleanBuffer)> {
    Ok(match pred {
        Predicate::Const(b) => {
            let v = if *b { BooleanBuffer::new_set(len) } else { BooleanBuffer::new_unset(len) };
            (v, BooleanBuffer::new_set(len))
        }
        Predicate::And(ps) => {
            // TRUE if all TRUE; FALSE (known) if any is known FALSE.
            let (mut t, mut k) = (BooleanBuffer::new_set(len), BooleanBuffer::new_set(len));
            let mut any_false = BooleanBuffer::new_unset(len);
            for p in ps {
                let (pt, pk) = evaluate3(p, cols, len, kern)?;
                any_false = &any_false | &(&pk & &!&pt);
                t = &t & &pt;
                k = &k & &pk;
            }
            let k = &k | &any_false;
            (t, k)
        }
        Predicate::Or(ps) => {
            // TRUE if any TRUE; known if any TRUE or all known.
            let (mut t, mut k) = (BooleanBuffer::new_unset(len), BooleanBuffer::new_set(len));
            for p in ps {
                let (pt, pk) = evaluate3(p, cols, len, kern)?;
                t = &t | &pt;
                k = &k & &pk;
            }
            let k = &k | &t;
            (t, k)
        }
        Predicate::Not(p) => {
            let (pt, pk) = evaluate3(p, cols, len, kern)?;
            (&!&pt & &pk, pk)
        }
        Predicate::Cmp { column, op, value } => {
            let arr = column_of(cols, *column)?;
            let bits = cmp_column(arr, *op, value, kern)?;
            known(bits, [arr], len)
        }
        Predicate::Like { column, pattern } => {
            let arr = column_of(cols, *column)?;
            let bits = like_column(arr, pattern, kern)?;
            known(bits, [arr], len)
        }
        Predicate::Expr(e) => {
            let out = crate::expr::evaluate(e, cols, len)?;
            let out = out.as_boolean_opt().ok_or_else(|| Error::internal(format!("WHERE expression of type {}", out.data_type())))?;
            known(out.values().clone(), [&(Arc::new(out.clone()) as ArrayRef)], len)
        }
        Predicate::CmpColumns { left, op, right } => {
            let (l, r) = (column_of(cols, *left)?, column_of(cols, *right)?);
            // Arrow compares floats by `total_cmp`, which is Tessera's order on canonical
            // values (-0.0 folded into 0.0, one NaN).
            let (cl, cr) = (canonical_array(l), canonical_array(r));
            let out: BooleanArray = match op {
                CmpOp::Eq => cmp::eq(&cl, &cr)?,
                CmpOp::NotEq => cmp::neq(&cl, &cr)?,
                CmpOp::Lt => cmp::lt(&cl, &cr)?,
                CmpOp::LtEq => cmp::lt_eq(&cl, &cr)?,
                CmpOp::Gt => cmp::gt(&cl, &cr)?,
                CmpOp::GtEq => cmp::gt_eq(&cl, &cr)?,
            };
            known(out.values().clone(), [l, r], len)
        }
    })
}

/// `(bits AND valid, valid)` where `valid` is the rows non-NULL in every input.
fn known<const N: usize>(bits: BooleanBuffer, inputs: [&ArrayRef; N], len: usize) -> (BooleanBuffer, BooleanBuffer) {
    let mut valid: Option<BooleanBuffer> = None;
    for a in inputs {
        if let Some(n) = a.logical_nulls() {
            valid = Some(match valid {
                Some(v) => &v & n.inner(),
                None => n.inner().clone(),
            });
        }
    }
    match valid {
        Some(v) => (&bits & &v, v),
        None => (bits, BooleanBuffer::new_set(len)),
    }
}

/// Chunk `m` of every loaded column, indexed by table column (`None` where not loaded):
/// the column view of one morsel that [`evaluate`] and the operators read.
pub fn morsel_columns(cols: &[Option<ColumnChunks>], m: usize) -> Vec<Option<ArrayRef>> {
    cols.iter().map(|c| c.as_ref().map(|c| c[m].clone())).collect()
}

/// Turns a filter bitmap into a selection vector (`None` when every row passes), with
/// `kern`'s bitmap-to-indices kernel.
pub fn selection(bits: &BooleanBuffer, kern: &Kernels) -> Selection {
    let passed = bits.count_set_bits();
    if passed == bits.len() {
        None
    } else if bits.offset() == 0 {
        // Copy the bitmap into whole u64 words (Arrow buffers need not be 8-byte sized).
        let bytes = &bits.inner().as_slice()[..bits.len().div_ceil(8)];
        let words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        let mut out = Vec::with_capacity(passed);
        (kern.bitmap_to_indices)(&words, bits.len(), &mut out);
        Some(out)
    } else {
        Some(bits.set_indices().map(|i| i as u32).collect())
    }
}

fn column_of(cols: &[Option<ArrayRef>], c: usize) -> Result<&ArrayRef> {
    cols.get(c)
        .and_then(|c| c.as_ref())
        .ok_or_else(|| Error::internal(format!("filter column {c} not loaded")))
}

fn from_words(words: Vec<u64>, len: usize) -> BooleanBuffer {
    BooleanBuffer::new(Buffer::from_vec(words), 0, len)
}

fn cmp_column(arr: &ArrayRef, op: CmpOp, value: &Value, kern: &Kernels) -> Result<BooleanBuffer> {
    let len = arr.len();
    let mut words = Vec::new();
    macro_rules! int {
        ($t:ty) => {{
            let Value::Int(v) = value else { return Err(mismatch(arr, value)) };
            let vals = arr.as_primitive::<$t>().values();
            match <<$t as ArrowPrimitiveType>::Native>::try_from(*v) {
                Ok(c) => (<<$t as ArrowPrimitiveType>::Native as SelectInt>::of(kern).cmp)(vals, op, c, &mut words),
                Err(_) => return Ok(out_of_range(op, *v > 0, len)),
            }
        }};
    }
    // Floats in Tessera's order (`tessera_common::float`): IEEE comparisons already treat
    // -0.0 as 0.0 and NaN as unequal to numbers; NaN is above every number, so it passes
    // `>`/`>=` and `<>`, and a NaN constant equals NaN only.
    macro_rules! float {
        ($t:ty, $nt:ty) => {{
            let c = match value {
                Value::Float(f) => *f as $nt,
                Value::Int(i) => *i as $nt,
                Value::Bytes(_) => return Err(mismatch(arr, value)),
            };
            let vals = arr.as_primitive::<$t>().values();
            if c.is_nan() {
                match op {
                    CmpOp::Eq | CmpOp::GtEq => pack(vals, &mut words, |v: $nt| v.is_nan()),
                    CmpOp::NotEq | CmpOp::Lt => pack(vals, &mut words, |v: $nt| !v.is_nan()),
                    CmpOp::LtEq => pack(vals, &mut words, |_| true),
                    CmpOp::Gt => pack(vals, &mut words, |_| false),
                }
            } else {
                match op {
                    CmpOp::Gt => pack(vals, &mut words, |v: $nt| v > c || v.is_nan()),
                    CmpOp::GtEq => pack(vals, &mut words, |v: $nt| v >= c || v.is_nan()),
                    _ => cmp_scalar(vals, op, c, &mut words),
                }
            }
        }};
    }
    tessera_common::int_like_dispatch!(arr.data_type(), A => int!(A), _ => match arr.data_type() {
        DataType::Float32 => float!(Float32Type, f32),
        DataType::Float64 => float!(Float64Type, f64),
        DataType::Utf8 | DataType::Binary => {
            let Value::Bytes(c) = value else { return Err(mismatch(arr, value)) };
            let (offsets, data) = string_parts(arr);
            if c.is_empty() && matches!(op, CmpOp::Eq | CmpOp::NotEq) {
                (kern.str_empty)(offsets, op == CmpOp::Eq, &mut words)
            } else {
                cmp_bytes(offsets, data, op, c, &mut words)
            }
        }
        other => return Err(Error::internal(format!("filter on unsupported type {other}"))),
    });
    Ok(from_words(words, len))
}

fn like_column(arr: &ArrayRef, pattern: &LikePattern, kern: &Kernels) -> Result<BooleanBuffer> {
    if !matches!(arr.data_type(), DataType::Utf8 | DataType::Binary) {
        return Err(Error::internal(format!("LIKE on a {} column", arr.data_type())));
    }
    let (offsets, data) = string_parts(arr);
    let mut words = Vec::new();
    match pattern {
        LikePattern::Contains(n) => (kern.contains)(offsets, data, n, &mut words),
        LikePattern::Prefix(p) => pack_strings(offsets, data, &mut words, |s| s.starts_with(p)),
        LikePattern::Suffix(p) => pack_strings(offsets, data, &mut words, |s| s.ends_with(p)),
        LikePattern::Exact(p) => cmp_bytes(offsets, data, CmpOp::Eq, p, &mut words),
    }
    Ok(from_words(words, arr.len()))
}

/// The offsets (rows + 1) and value bytes of a Utf8 or Binary array.
///
/// # Panics
/// If `arr` is neither Utf8 nor Binary (callers dispatch on the type first).
pub fn string_parts(arr: &ArrayRef) -> (&[i32], &[u8]) {
    match arr.data_type() {
        DataType::Utf8 => {
            let a = arr.as_string::<i32>();
            (a.value_offsets(), a.value_data())
        }
        DataType::Binary => {
            let a = arr.as_binary::<i32>();
            (a.value_offsets(), a.value_data())
        }
        other => panic!("string_parts on {other}"),
    }
}

/// Result of `x <op> v` for every x of a type whose range `v` lies above (`above`) or below.
fn out_of_range(op: CmpOp, above: bool, len: usize) -> BooleanBuffer {
    let all = match op {
        CmpOp::Eq => false,
        CmpOp::NotEq => true,
        CmpOp::Lt | CmpOp::LtEq => above,
        CmpOp::Gt | CmpOp::GtEq => !above,
    };
    if all { BooleanBuffer::new_set(len) } else { BooleanBuffer::new_unset(len) }
}

fn mismatch(arr: &ArrayRef, value: &Value) -> Error {
    Error::internal(format!("literal {value:?} not coerced to {}", arr.data_type()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int16Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn predicates_and_ranges() {
        let a: ArrayRef = Arc::new(Int16Array::from(vec![Some(1), None, Some(-5), Some(300)]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["", "x", "", "y"]));
        let cols = vec![Some(a), Some(s)];
        let run = |p: Predicate| {
            let b = evaluate(&p, &cols, 4, Kernels::scalar()).unwrap();
            (0..4).map(|i| b.value(i)).collect::<Vec<_>>()
        };
        let gt0 = Predicate::Cmp { column: 0, op: CmpOp::Gt, value: Value::Int(0) };
        assert_eq!(run(gt0.clone()), vec![true, false, false, true]);
        // literal above Int16's range: every non-NULL row is below it
        let big = Predicate::Cmp { column: 0, op: CmpOp::Lt, value: Value::Int(100_000) };
        assert_eq!(run(big), vec![true, false, true, true]);
        let nonempty = Predicate::Cmp { column: 1, op: CmpOp::NotEq, value: Value::Bytes(vec![]) };
        assert_eq!(run(Predicate::And(vec![gt0.clone(), nonempty.clone()])), vec![false, false, false, true]);
        assert_eq!(run(Predicate::Or(vec![gt0.clone(), nonempty.clone()])), vec![true, true, false, true]);
        assert_eq!(run(Predicate::Not(Box::new(nonempty))), vec![true, false, true, false]);
        // NOT over NULL stays UNKNOWN: row 1 (NULL) is kept by neither the predicate nor its negation.
        assert_eq!(run(Predicate::Not(Box::new(gt0.clone()))), vec![false, false, true, false]);
        // UNKNOWN OR TRUE is TRUE; UNKNOWN AND FALSE is FALSE, so NOT of it is TRUE.
        let is_x = Predicate::Cmp { column: 1, op: CmpOp::Eq, value: Value::Bytes(b"x".to_vec()) };
        assert_eq!(run(Predicate::Or(vec![gt0.clone(), is_x.clone()])), vec![true, true, false, true]);
        let and = Predicate::And(vec![gt0.clone(), Predicate::Not(Box::new(is_x))]);
        assert_eq!(run(Predicate::Not(Box::new(and))), vec![false, true, true, false]);
        let sel = selection(&evaluate(&Predicate::Const(true), &cols, 4, Kernels::scalar()).unwrap(), Kernels::scalar());
        assert!(sel.is_none());
    }
}
