//! Slots: things held at once (streams, sessions, blocking waits), capped in all and for
//! each principal, so that one principal who takes every slot it may still leaves room
//! for the others.
//!
//! Invariant: a slot is given back when its [`Slot`] drops, whatever ends its holder.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// A cap on things held at once, in all and per principal.
#[derive(Debug)]
pub(crate) struct Slots {
    max: usize,
    per_principal: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    all: usize,
    /// Only principals holding a slot now: an entry goes when its count falls to zero.
    by: HashMap<String, usize>,
}

/// Why no slot was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Every slot of the server is taken.
    All,
    /// The principal holds as many slots as each one may.
    Principal,
}

/// One slot taken; given back on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    principal: Option<String>,
}

impl Slots {
    /// At most `max` slots in all, and `per_principal` for each principal.
    pub(crate) fn new(max: usize, per_principal: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            per_principal,
            held: Mutex::default(),
        })
    }

    /// A slot for `principal` (`None`, without tokens, is held against the total only).
    pub(crate) fn take(self: &Arc<Self>, principal: Option<&str>) -> Result<Slot, Full> {
        let mut held = self.held.lock();
        if held.all >= self.max {
            return Err(Full::All);
        }
        if let Some(principal) = principal {
            let mine = held.by.get(principal).copied().unwrap_or(0);
            if mine >= self.per_principal {
                return Err(Full::Principal);
            }
            held.by.insert(principal.to_owned(), mine + 1);
        }
        held.all += 1;
        Ok(Slot {
            slots: self.clone(),
            principal: principal.map(str::to_owned),
        })
    }

    /// How many slots `principal` holds now.
    #[cfg(test)]
    fn held_by(&self, principal: &str) -> usize {
        self.held.lock().by.get(principal).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock();
        held.all -= 1;
        if let Some(principal) = &self.principal
            && let Some(mine) = held.by.get_mut(principal)
        {
            *mine -= 1;
            if *mine == 0 {
                held.by.remove(principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_at_its_cap_leaves_the_others_their_slots() {
        let slots = Slots::new(5, 2);
        let bobs: Vec<Slot> = (0..2).map(|_| slots.take(Some("bob")).unwrap()).collect();
        assert_eq!(slots.take(Some("bob")).unwrap_err(), Full::Principal);
        let alices = slots.take(Some("alice")).unwrap();
        assert_eq!(slots.held_by("bob"), 2);
        drop(bobs);
        assert_eq!(slots.held_by("bob"), 0);
        assert!(
            !slots.held.lock().by.contains_key("bob"),
            "no entry is kept"
        );
        drop(alices);
        assert_eq!(slots.held.lock().all, 0);
    }

    #[test]
    fn the_total_caps_every_principal_and_callers_without_one() {
        let slots = Slots::new(3, 2);
        let _a = slots.take(Some("alice")).unwrap();
        let _b = slots.take(Some("bob")).unwrap();
        let anonymous = slots.take(None).unwrap();
        assert_eq!(slots.take(Some("carol")).unwrap_err(), Full::All);
        assert_eq!(slots.take(None).unwrap_err(), Full::All);
        drop(anonymous);
        assert!(slots.take(Some("carol")).is_ok());
    }
}
