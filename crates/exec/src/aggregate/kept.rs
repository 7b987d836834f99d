//! Expressions evaluated on the rows WHERE keeps: a computed GROUP BY key or aggregate
//! input over a selective filter is evaluated on the kept rows only and spread back to the
//! morsel's row positions, so that only rows WHERE keeps can make the query fail.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::DataType;
use tessera_common::{Error, Result};

use crate::expr::{Expr, evaluate as evaluate_expr};

/// `e` over a morsel of `len` rows (columns `mcols`) of which WHERE keeps `sel` (`None`:
/// all). Evaluated on the whole morsel when the filter keeps more than half of it, else (and
/// when the whole morsel fails, e.g. an integer division by zero in a row WHERE drops) on
/// the kept rows only, spread back to their positions: dropped rows then hold a kept row's
/// value and are never read. So only rows WHERE keeps can make the query fail.
pub(super) fn eval_kept(e: &Expr, mcols: &[Option<ArrayRef>], len: usize, sel: Option<&[u32]>) -> Result<ArrayRef> {
    let Some(s) = sel else { return evaluate_expr(e, mcols, len) };
    if s.len() * 2 > len
        && let Ok(a) = evaluate_expr(e, mcols, len)
    {
        return Ok(a);
    }
    if s.is_empty() {
        return Ok(arrow::array::new_null_array(&e.data_type(), len));
    }
    let idx = arrow::array::UInt32Array::from(s.to_vec());
    // Only the columns `e` reads (the morsel also holds the other keys' columns: Q40's URL).
    let mut used = Vec::new();
    e.columns(&mut used);
    let mut taken: Vec<Option<ArrayRef>> = vec![None; mcols.len()];
    for c in used {
        if let Some(a) = mcols.get(c).and_then(|a| a.as_ref())
            && taken[c].is_none()
        {
            taken[c] = Some(arrow::compute::take(a, &idx, None)?);
        }
    }
    let compact = evaluate_expr(e, &taken, s.len())?;
    spread(&compact, s, len)
}

/// `compact` (the values of rows `sel` of a morsel of `len` rows, in order) spread back to
/// the morsel's positions; the other rows hold values that are never read. A string or
/// binary result shares `compact`'s bytes, the other rows empty values between them, so no
/// byte is copied (copying a kept value into each of them took 70% of Q40's time).
fn spread(compact: &ArrayRef, sel: &[u32], len: usize) -> Result<ArrayRef> {
    Ok(match compact.data_type() {
        DataType::Utf8 => Arc::new(spread_bytes(compact.as_string::<i32>(), sel, len)?),
        DataType::Binary => Arc::new(spread_bytes(compact.as_binary::<i32>(), sel, len)?),
        _ => {
            let mut pos = vec![0u32; len];
            for (j, &r) in sel.iter().enumerate() {
                pos[r as usize] = j as u32;
            }
            arrow::compute::take(compact, &arrow::array::UInt32Array::from(pos), None)?
        }
    })
}

/// [`spread`] of a byte array: offsets only, over `compact`'s values buffer.
fn spread_bytes<T: arrow::datatypes::ByteArrayType<Offset = i32>>(
    compact: &arrow::array::GenericByteArray<T>,
    sel: &[u32],
    len: usize,
) -> Result<arrow::array::GenericByteArray<T>> {
    use arrow::array::Array;
    let src = compact.value_offsets();
    let mut offsets: Vec<i32> = Vec::with_capacity(len + 1);
    offsets.push(src[0]);
    let mut valid = compact.nulls().map(|_| arrow::array::BooleanBufferBuilder::new(len));
    for (j, &r) in sel.iter().enumerate() {
        let r = r as usize;
        if r < offsets.len() - 1 || r >= len {
            return Err(Error::internal("selection out of order or past the morsel"));
        }
        // Rows before `r` that WHERE dropped: empty values at the current end.
        let end = *offsets.last().expect("starts with one offset");
        let gap = r - (offsets.len() - 1);
        offsets.resize(offsets.len() + gap, end);
        offsets.push(src[j + 1]);
        if let Some(v) = &mut valid {
            v.append_n(gap, true);
            v.append(compact.is_valid(j));
        }
    }
    let end = *offsets.last().expect("starts with one offset");
    let gap = len + 1 - offsets.len();
    offsets.resize(len + 1, end);
    if let Some(v) = &mut valid {
        v.append_n(gap, true);
    }
    let nulls = valid.map(|mut v| arrow::buffer::NullBuffer::new(v.finish()));
    let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
    // SAFETY: the offsets are monotonic (checked by `OffsetBuffer::new`) and every value is
    // either one of `compact`'s values (the same offsets into the same buffer: for strings,
    // valid UTF-8) or empty at the end offset of one of them (a character boundary); all
    // lie within `compact`'s values buffer, which the new array shares.
    Ok(unsafe { arrow::array::GenericByteArray::new_unchecked(offsets, compact.values().clone(), nulls) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BinaryArray, Int32Array, StringArray};

    /// `spread` puts each kept value at its row (strings sharing the compact bytes, NULLs
    /// kept), for sliced inputs, selections at both ends, empty gaps and fixed-width types.
    #[test]
    fn spread_puts_kept_values_at_their_rows() {
        let base = StringArray::from(vec![Some("zz"), Some("ab"), None, Some(""), Some("жёлтый"), Some("x")]);
        let compact: ArrayRef = Arc::new(base.slice(1, 5)); // "ab", NULL, "", "жёлтый", "x"
        for sel in [vec![0u32, 3, 4, 8, 9], vec![2, 5, 6, 7, 11], vec![0, 1, 2, 3, 4]] {
            let len = 12;
            let out = spread(&compact, &sel, len).unwrap();
            assert_eq!(out.len(), len);
            let out = out.as_string::<i32>();
            let kept = compact.as_string::<i32>();
            for (j, &r) in sel.iter().enumerate() {
                assert_eq!(out.is_valid(r as usize), kept.is_valid(j), "{sel:?} row {r}");
                if kept.is_valid(j) {
                    assert_eq!(out.value(r as usize), kept.value(j), "{sel:?} row {r}");
                }
            }
        }
        let bin: ArrayRef = Arc::new(BinaryArray::from(vec![&b"\xff\x00"[..], b"q"]));
        let out = spread(&bin, &[1, 4], 6).unwrap();
        assert_eq!(out.as_binary::<i32>().value(1), b"\xff\x00");
        assert_eq!(out.as_binary::<i32>().value(4), b"q");
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(7), None]));
        let out = spread(&ints, &[0, 5], 6).unwrap();
        assert_eq!(out.as_primitive::<arrow::datatypes::Int32Type>().value(0), 7);
        assert!(out.is_null(5));
        assert!(spread(&compact, &[3, 1, 2, 4, 5], 12).is_err());
    }
}
