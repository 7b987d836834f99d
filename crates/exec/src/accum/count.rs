//! `COUNT(*)` and `COUNT(x)`: rows, or non-NULL inputs, per group (Int64, never NULL).

use std::any::Any;

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::datatypes::DataType;
use tessera_common::Result;
use tessera_kernels::Kernels;

use super::{GroupsAccumulator, OrdVal, decode_exact, same};
use crate::spill::{Dec, Enc};

/// Counts per group. `COUNT(*)` has no input; `COUNT(x)` counts the valid rows of its input.
#[derive(Debug, Default)]
pub(super) struct Count {
    counts: Vec<i64>,
}

impl GroupsAccumulator for Count {
    fn reserve(&mut self, n: usize) {
        self.counts.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.counts.resize(n, 0);
    }

    fn memory_size(&self) -> usize {
        self.counts.capacity() * 8
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let counts = &mut self.counts;
        match input.and_then(|a| a.logical_nulls()) {
            None => gids.iter().for_each(|&g| counts[g as usize] += 1),
            Some(nulls) => {
                for (i, &g) in gids.iter().enumerate() {
                    let r = sel.map_or(i, |s| s[i] as usize);
                    counts[g as usize] += nulls.is_valid(r) as i64;
                }
            }
        }
        Ok(())
    }

    fn update_one(&mut self, g: usize, input: Option<&ArrayRef>, sel: Option<&[u32]>, rows: usize, _kern: &Kernels) -> bool {
        let valid = match input.and_then(|a| a.logical_nulls()) {
            None => rows,
            Some(nulls) => match sel {
                Some(s) => s.iter().filter(|&&r| nulls.is_valid(r as usize)).count(),
                None => nulls.len() - nulls.null_count(),
            },
        };
        self.counts[g] += valid as i64;
        true
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            self.counts[d as usize] += other.counts[s as usize];
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.slice(&self.counts);
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        self.counts = decode_exact(d, groups, "count")?;
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        OrdVal::Int(self.counts[g as usize] as i128)
    }

    fn counts(&self) -> Option<&[i64]> {
        Some(&self.counts)
    }

    fn emit(&self, gids: &[u32], _dt: &DataType) -> Result<ArrayRef> {
        Ok(std::sync::Arc::new(Int64Array::from_iter_values(gids.iter().map(|&g| self.counts[g as usize]))))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
