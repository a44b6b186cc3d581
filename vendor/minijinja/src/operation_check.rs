//! PATCH(mcp-task-server): a check on the work of one operator.
//!
//! An operator costs one unit of fuel, yet some build or walk a whole value in that one
//! instruction: `~` formats both operands, `+` and `*` on strings allocate their result,
//! `==`, `<` and `in` walk sequences (lazily repeated ones too), slicing and unpacking
//! collect them. The embedder arms a check on its thread; these operators call it on the
//! operands they are about to walk and on the size of what they are about to build, and
//! fail with its error instead of doing the work.

use std::cell::Cell;

use crate::error::Error;
use crate::value::{Value, ValueKind};

/// What an operator is about to handle: a value it will walk or format, or the size in
/// bytes of a string it will build.
#[derive(Debug, Clone, Copy)]
pub enum Operand<'a> {
    /// A value the operator will walk or format whole.
    Value(&'a Value),
    /// The length in bytes of a string the operator will build.
    Size(usize),
}

/// The check: an error refuses the operation.
pub type Check = fn(Operand<'_>) -> Result<(), Error>;

thread_local! {
    static CHECK: Cell<Option<Check>> = const { Cell::new(None) };
}

/// Arms `check` for the operators evaluated on this thread from now on (`None` disarms);
/// returns the check it replaces.
pub fn set_operation_check(check: Option<Check>) -> Option<Check> {
    CHECK.with(|cell| cell.replace(check))
}

/// Runs the armed check on `operand`, if any.
pub(crate) fn check(operand: Operand<'_>) -> Result<(), Error> {
    match CHECK.with(Cell::get) {
        Some(check) => check(operand),
        None => Ok(()),
    }
}

/// Runs the armed check on a value that is walked item by item (a sequence, an
/// iterable or a map); scalars and strings cost nothing to compare.
pub(crate) fn check_walked(value: &Value) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::Plain => {
            check(Operand::Value(value))
        }
        _ => Ok(()),
    }
}
