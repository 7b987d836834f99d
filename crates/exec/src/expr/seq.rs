//! A direct matcher for the simplest anchored patterns: a sequence of literals, classes and
//! repetitions of one literal or class, with capture groups around parts of the sequence,
//! that can only match at the start of the text. Q29's head `^https?://(?:www\.)?([^/]+)/`
//! is one: the general engines pay for generality there (the bounded backtracker took
//! ~190 ns per generated Referer on this machine, mostly checking its visited set; this
//! matcher ~60 ns, and `replaceRegexpOne` as a whole went from ~240 to ~80 ns a row).
//!
//! **Semantics.** A flat sequence has one path through it, so leftmost-first matching is
//! plain backtracking over the repetitions: a greedy one tries its longest run first, a lazy
//! one its shortest, exactly the order in which the backtracking engines prefer them; every
//! capture group is on the path, so the last saved positions are the captures.
//!
//! **When it answers.** Classes are tested on ASCII bytes only: a text byte at or above
//! `0x80` that a class or a class repetition must test makes the matcher give up, as does a
//! budget of tries (repetitions next to each other can take polynomial time); the caller
//! then runs the general engines. Literals compare bytes, which is exact for UTF-8 and for
//! bytes alike. So the answer, when there is one, is the regex crate's, for UTF-8 and byte
//! patterns.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// A compiled sequence (see the module docs). Slot `2g` / `2g + 1` of a match: where
/// group `g` starts / ends (group 0: the whole match).
#[derive(Debug, Clone)]
pub(super) struct Seq {
    prog: Vec<Op>,
    slots: usize,
}

#[derive(Debug, Clone)]
enum Op {
    /// The unit once.
    One(Unit),
    Rep { unit: Unit, min: usize, max: Option<usize>, greedy: bool },
    Save(usize),
}

/// What an op matches: a literal, or one byte of a class.
#[derive(Debug, Clone)]
enum Unit {
    Lit(Box<[u8]>),
    Set(AsciiSet),
}

impl Unit {
    /// Bytes one match takes.
    fn width(&self) -> usize {
        match self {
            Unit::Lit(l) => l.len(),
            Unit::Set(_) => 1,
        }
    }

    /// Whether the unit matches at `pos` of `text`.
    #[inline(always)]
    fn matches_at(&self, text: &[u8], pos: usize) -> Result<bool, GaveUp> {
        match self {
            Unit::Lit(l) => Ok(starts_with(&text[pos..], l)),
            Unit::Set(set) => match text.get(pos) {
                Some(&b) => set.test(b),
                None => Ok(false),
            },
        }
    }
}

/// A class as judged on ASCII bytes: per byte [`IN`], [`OUT`] or [`UNKNOWN`] (`0x80` and
/// up, which the matcher does not judge).
#[derive(Debug, Clone)]
struct AsciiSet(Box<[u8; 256]>);

const OUT: u8 = 0;
const IN: u8 = 1;
const UNKNOWN: u8 = 2;

impl AsciiSet {
    fn of(class: &Class) -> AsciiSet {
        let mut table = Box::new([OUT; 256]);
        table[0x80..].fill(UNKNOWN);
        let mut add = |lo: u32, hi: u32| {
            for b in lo..=hi.min(0x7f) {
                table[b as usize] = IN;
            }
        };
        match class {
            Class::Unicode(c) => c.ranges().iter().for_each(|r| add(r.start() as u32, r.end() as u32)),
            Class::Bytes(c) => c.ranges().iter().for_each(|r| add(u32::from(r.start()), u32::from(r.end()))),
        }
        AsciiSet(table)
    }

    /// Whether `b` is in the set; [`GaveUp`] for a byte the set cannot judge (non-ASCII).
    #[inline(always)]
    fn test(&self, b: u8) -> Result<bool, GaveUp> {
        match self.0[usize::from(b)] {
            IN => Ok(true),
            OUT => Ok(false),
            _ => Err(GaveUp),
        }
    }
}

/// Whether `text` starts with `lit` (an inline loop: literals are a few bytes).
#[inline(always)]
fn starts_with(text: &[u8], lit: &[u8]) -> bool {
    text.len() >= lit.len() && text.iter().zip(lit).all(|(a, b)| a == b)
}

/// The matcher gave up: the general engines decide.
struct GaveUp;

impl Seq {
    /// The sequence for `hir`, if it has that shape: `^` first, then literals, classes,
    /// repetitions of a literal or a class, and capture groups of such (no alternation, no
    /// other assertion, no group inside a repetition).
    pub(super) fn new(hir: &Hir) -> Option<Seq> {
        let HirKind::Concat(subs) = hir.kind() else { return None };
        let (first, rest) = subs.split_first()?;
        if *first.kind() != HirKind::Look(Look::Start) {
            return None;
        }
        let mut seq = Seq { prog: vec![Op::Save(0)], slots: 2 };
        for sub in rest {
            seq.compile(sub)?;
        }
        seq.prog.push(Op::Save(1));
        Some(seq)
    }

    fn compile(&mut self, hir: &Hir) -> Option<()> {
        match hir.kind() {
            HirKind::Empty => {}
            HirKind::Literal(l) => self.prog.push(Op::One(Unit::Lit(l.0.clone()))),
            HirKind::Class(c) => self.prog.push(Op::One(Unit::Set(AsciiSet::of(c)))),
            HirKind::Concat(subs) => subs.iter().try_for_each(|s| self.compile(s))?,
            HirKind::Capture(c) => {
                let g = c.index as usize;
                self.prog.push(Op::Save(2 * g));
                self.compile(&c.sub)?;
                self.prog.push(Op::Save(2 * g + 1));
                self.slots = self.slots.max(2 * g + 2);
            }
            HirKind::Repetition(r) => {
                let unit = match r.sub.kind() {
                    HirKind::Literal(l) => Unit::Lit(l.0.clone()),
                    HirKind::Class(c) => Unit::Set(AsciiSet::of(c)),
                    _ => return None,
                };
                let max = match r.max {
                    Some(m) => Some(usize::try_from(m).ok()?),
                    None => None,
                };
                self.prog.push(Op::Rep { unit, min: usize::try_from(r.min).ok()?, max, greedy: r.greedy });
            }
            _ => return None,
        }
        Some(())
    }

    /// Slots a match fills (`2 * (groups + 1)`).
    pub(super) fn slots(&self) -> usize {
        self.slots
    }

    /// Matches at the start of `text`: `Some(true)` with the spans in `slots` (at least
    /// [`Seq::slots`] long), `Some(false)` when the pattern does not match, `None` when the
    /// matcher gave up.
    pub(super) fn run(&self, text: &[u8], slots: &mut [usize]) -> Option<bool> {
        // Tries of repetition lengths: enough for any sequence with one ambiguous choice
        // per byte; quadratic cases give up early.
        let mut budget = 4 * (text.len() + self.prog.len());
        match self.at(0, 0, text, slots, &mut budget) {
            Ok(found) => Some(found),
            Err(GaveUp) => None,
        }
    }

    fn at(&self, mut pc: usize, mut pos: usize, text: &[u8], slots: &mut [usize], budget: &mut usize) -> Result<bool, GaveUp> {
        // Every op of a flat sequence lies on the path of a match, so a save on a path that
        // fails is overwritten on the path that succeeds: no undo needed.
        while let Some(op) = self.prog.get(pc) {
            match op {
                Op::Save(s) => slots[*s] = pos,
                Op::One(unit) => {
                    if !unit.matches_at(text, pos)? {
                        return Ok(false);
                    }
                    pos += unit.width();
                }
                Op::Rep { unit, min, max, greedy } => {
                    let (limit, width) = (max.unwrap_or(usize::MAX), unit.width());
                    let mut runs = 0;
                    while runs < limit && unit.matches_at(text, pos + runs * width)? {
                        runs += 1;
                    }
                    if runs < *min {
                        return Ok(false);
                    }
                    let mut try_k = |k: usize| -> Result<bool, GaveUp> {
                        *budget = budget.checked_sub(1).ok_or(GaveUp)?;
                        self.at(pc + 1, pos + k * width, text, slots, budget)
                    };
                    if *greedy {
                        for k in (*min..=runs).rev() {
                            if try_k(k)? {
                                return Ok(true);
                            }
                        }
                    } else {
                        for k in *min..=runs {
                            if try_k(k)? {
                                return Ok(true);
                            }
                        }
                    }
                    return Ok(false);
                }
            }
            pc += 1;
        }
        Ok(true)
    }
}
