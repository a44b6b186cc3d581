//! The budgets of one template evaluation: the fuel it may burn and the size of what it
//! may produce.
//!
//! minijinja counts its own instructions (its `fuel` feature). Filters can do much more
//! work per instruction than that (`join` over a lazily repeated list, `replace` with an
//! empty pattern), so every filter charges the size of what it is given against the same
//! fuel before it runs, and refuses input or arguments that would build more than the
//! output cap. The charge lives in a thread-local scope armed for the evaluation: an
//! evaluation is synchronous and never leaves its thread.
//!
//! Operators are in the same case (`a ~ a` doubles a string, `==` walks two lazily
//! repeated lists), and minijinja has no hook on them: the vendored copy
//! (vendor/minijinja/PATCHES.md) calls the check armed here on each operand an operator
//! walks or formats and on the size of each string it builds, before doing the work.

use std::cell::Cell;

use minijinja::operation_check::{self, Operand};
use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// Instructions (and units of filter work) one evaluation may spend by default.
pub const DEFAULT_FUEL: u64 = 1_000_000;

/// Bytes one evaluation may produce by default: rendered text, or an evaluated value as JSON.
pub const DEFAULT_MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// How much filter work one byte of input costs: copying text is cheap next to an
/// instruction of the template machine.
const BYTES_PER_FUEL: usize = 64;

/// The limits of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateLimits {
    /// Instructions and units of filter work (minijinja's fuel).
    pub fuel: u64,
    /// Bytes of rendered text or of an evaluated value (as JSON), and of any value a
    /// filter is handed or asked to build.
    pub max_output: usize,
}

impl Default for TemplateLimits {
    fn default() -> TemplateLimits {
        TemplateLimits {
            fuel: DEFAULT_FUEL,
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }
}

impl TemplateLimits {
    /// The most items a list a filter builds may have: a list of more items than this
    /// cannot fit the output cap once written out.
    pub(crate) fn max_items(&self) -> usize {
        (self.max_output / 16).max(1)
    }
}

/// Which budget an evaluation exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The fuel: too many instructions, or too much filter work.
    Fuel,
    /// The size of what the evaluation produces.
    Output,
}

impl Budget {
    /// The budget's name as errors show it, the name of its command-line option.
    pub fn name(self) -> &'static str {
        match self {
            Budget::Fuel => "template-fuel",
            Budget::Output => "template-max-output",
        }
    }
}

#[derive(Clone, Copy)]
struct Scope {
    limits: TemplateLimits,
    /// Filter work left, in fuel units.
    work_left: u64,
    /// The budget a filter found exhausted, to tell it from the filter's own errors.
    exhausted: Option<Budget>,
    /// Bytes of operator work not yet charged: less than one unit of fuel.
    pending: usize,
}

thread_local! {
    static SCOPE: Cell<Option<Scope>> = const { Cell::new(None) };
    /// Evaluations armed on this thread so far.
    static ARMED: Cell<u64> = const { Cell::new(0) };
}

/// How many evaluations have been armed on this thread: a scheduler deciding nodes reads
/// the clock only after work that may have taken time.
pub(crate) fn evaluations() -> u64 {
    ARMED.with(Cell::get)
}

/// The armed budget of the evaluation running on this thread, while it lives.
pub(crate) struct Armed {
    previous: Option<Scope>,
    previous_check: Option<operation_check::Check>,
}

/// Arms `limits` for the evaluation that follows on this thread.
pub(crate) fn arm(limits: TemplateLimits) -> Armed {
    ARMED.with(|armed| armed.set(armed.get().wrapping_add(1)));
    let scope = Scope {
        limits,
        work_left: limits.fuel,
        exhausted: None,
        pending: 0,
    };
    Armed {
        previous: SCOPE.with(|cell| cell.replace(Some(scope))),
        previous_check: operation_check::set_operation_check(Some(check_operation)),
    }
}

impl Armed {
    /// The budget a filter found exhausted during this evaluation, if any.
    pub(crate) fn exhausted(&self) -> Option<Budget> {
        SCOPE.with(|cell| cell.get().and_then(|scope| scope.exhausted))
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        SCOPE.with(|cell| cell.set(self.previous));
        operation_check::set_operation_check(self.previous_check);
    }
}

/// The limits of the evaluation on this thread (the defaults outside of one).
pub(crate) fn limits() -> TemplateLimits {
    SCOPE.with(|cell| cell.get().map(|scope| scope.limits).unwrap_or_default())
}

/// The error of an exhausted budget, recorded so that the evaluation reports it as such.
pub(crate) fn exceeded(budget: Budget, what: &str) -> Error {
    SCOPE.with(|cell| {
        if let Some(mut scope) = cell.get() {
            scope.exhausted = Some(budget);
            cell.set(Some(scope));
        }
    });
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{what} exceeds the {} budget", budget.name()),
    )
}

/// Refuses a size above the output cap.
pub(crate) fn check_size(size: usize, what: &str) -> Result<(), Error> {
    match size <= limits().max_output {
        true => Ok(()),
        false => Err(exceeded(Budget::Output, what)),
    }
}

/// The check minijinja's operators call before they walk or format an operand, or build
/// a string: the operand is charged like a filter's input, the string refused past the
/// output cap and its bytes charged against the fuel.
fn check_operation(operand: Operand<'_>) -> Result<(), Error> {
    match operand {
        Operand::Value(value) => charge(value, "an operand"),
        Operand::Size(size) => {
            check_size(size, "the string an operator builds")?;
            charge_bytes(size, "the string an operator builds")
        }
    }
}

/// Charges `units` of fuel for work a filter does besides walking its input (compiling a
/// regular expression, matching one that reads each byte many times).
pub(crate) fn charge_fuel(units: u64, what: &str) -> Result<(), Error> {
    let bytes = units.saturating_mul(BYTES_PER_FUEL as u64);
    charge_bytes(usize::try_from(bytes).unwrap_or(usize::MAX), what)
}

/// Charges `bytes` of work against the fuel, the remainder of a unit kept for the next.
fn charge_bytes(bytes: usize, what: &str) -> Result<(), Error> {
    let starved = SCOPE.with(|cell| {
        let Some(mut scope) = cell.get() else {
            return false;
        };
        let bytes = scope.pending.saturating_add(bytes);
        scope.pending = bytes % BYTES_PER_FUEL;
        let cost = (bytes / BYTES_PER_FUEL) as u64;
        scope.work_left = scope.work_left.saturating_sub(cost);
        cell.set(Some(scope));
        scope.work_left == 0
    });
    match starved {
        true => Err(exceeded(Budget::Fuel, what)),
        false => Ok(()),
    }
}

/// Charges the work of handling `value` (its size, nested items included) against the
/// evaluation's fuel, and refuses a value larger than the output cap. The walk stops at
/// the cap, so that a lazily repeated list costs no more to refuse than the cap.
/// Each scalar, item or string walked costs a unit of fuel besides its bytes: walking a
/// list (`==` on two of them, `join`) takes as long per item as an instruction.
pub(crate) fn charge(value: &Value, what: &str) -> Result<(), Error> {
    let max = limits().max_output;
    let mut walk = Walk {
        left: max,
        items: 0,
    };
    if !size_within(value, &mut walk) {
        return Err(exceeded(Budget::Output, what));
    }
    let items = walk.items.saturating_mul(BYTES_PER_FUEL);
    charge_bytes((max - walk.left).saturating_add(items), what)
}

/// Whether `value` (nested items included) is at most `max` bytes, by the measure of
/// [`charge`]: cheap for a long string, and stopped at `max` for a long list.
pub(crate) fn fits(value: &Value, max: usize) -> bool {
    let mut walk = Walk {
        left: max,
        items: 0,
    };
    size_within(value, &mut walk)
}

/// A walk over a value: the bytes left under the cap, and the items met so far.
struct Walk {
    left: usize,
    items: usize,
}

/// Takes `n` from what is left, for one more item; false if there was not that much.
fn take(walk: &mut Walk, n: usize) -> bool {
    walk.items += 1;
    match walk.left.checked_sub(n) {
        Some(rest) => {
            walk.left = rest;
            true
        }
        None => false,
    }
}

/// Whether `value`, nested items included, fits in `left` bytes (one per scalar or item
/// besides a string's bytes); `left` is what remains.
fn size_within(value: &Value, left: &mut Walk) -> bool {
    match value.kind() {
        ValueKind::String => take(left, value.as_str().map_or(0, str::len).max(1)),
        ValueKind::Bytes => take(left, value.as_bytes().map_or(0, <[u8]>::len).max(1)),
        ValueKind::Seq | ValueKind::Iterable => {
            // A sized list longer than what is left is refused before it is walked.
            if value.len().is_some_and(|n| n > left.left) || !take(left, 1) {
                return false;
            }
            let Ok(items) = value.try_iter() else {
                return true;
            };
            for item in items {
                if !take(left, 1) || !size_within(&item, left) {
                    return false;
                }
            }
            true
        }
        ValueKind::Map => {
            if value.len().is_some_and(|n| n > left.left) || !take(left, 1) {
                return false;
            }
            let Ok(keys) = value.try_iter() else {
                return true;
            };
            for key in keys {
                let item = value.get_item(&key).unwrap_or_default();
                if !size_within(&key, left) || !size_within(&item, left) {
                    return false;
                }
            }
            true
        }
        _ => take(left, 1),
    }
}

/// A writer that holds at most `max` bytes and fails past them, so that rendering stops
/// at the cap instead of building the whole text first.
pub(crate) struct Capped {
    pub bytes: Vec<u8>,
    max: usize,
    pub overflowed: bool,
}

impl Capped {
    pub fn new(max: usize) -> Capped {
        Capped {
            bytes: Vec::new(),
            max,
            overflowed: false,
        }
    }
}

impl std::io::Write for Capped {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + data.len() > self.max {
            self.overflowed = true;
            return Err(std::io::Error::other("output cap reached"));
        }
        self.bytes.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that counts bytes up to `max` and keeps none: the size of a value's JSON,
/// measured without building it.
pub(crate) struct Counter {
    pub written: usize,
    max: usize,
}

impl Counter {
    pub fn new(max: usize) -> Counter {
        Counter { written: 0, max }
    }
}

impl std::io::Write for Counter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.written += data.len();
        if self.written > self.max {
            return Err(std::io::Error::other("output cap reached"));
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazily_repeated_list_is_refused_without_being_walked() {
        let _armed = arm(TemplateLimits::default());
        let huge = Value::from_serialize((0..100).collect::<Vec<_>>());
        let env = minijinja::Environment::new();
        let repeated = env
            .compile_expression("x * 1000000000")
            .unwrap()
            .eval(minijinja::context! { x => huge })
            .unwrap();
        assert!(charge(&repeated, "the list").is_err());
        assert_eq!(_armed.exhausted(), Some(Budget::Output));
    }

    #[test]
    fn filter_work_runs_out_of_fuel() {
        let armed = arm(TemplateLimits {
            fuel: 10,
            max_output: 1 << 20,
        });
        let text = Value::from("x".repeat(100_000));
        let error = charge(&text, "the text").unwrap_err();
        assert!(error.to_string().contains("template-fuel"), "{error}");
        assert_eq!(armed.exhausted(), Some(Budget::Fuel));
    }
}
