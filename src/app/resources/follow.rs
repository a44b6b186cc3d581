//! What a followed resource is now, told without reading it: a file by its stamp, a run
//! by its revision (which a lease renewal never moves), a workflow by its source. A
//! subscription looks again at every change of the store, and sends an update only when
//! what it follows differs for its caller; so a change costs each subscription a `fstat`
//! or a point query, and a file is read again only once it changed (and then once, its
//! digest kept for every subscriber).

use std::hash::{Hash, Hasher};

use super::{Canonical, Target};
use crate::app::{App, Caller};
use crate::engine::files::Stamp;

/// What a resource held for a caller when last looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    File(Stamp),
    Run(i64),
    Workflow(u64),
}

/// A resource a subscription follows, and what it was when last looked at.
#[derive(Debug, Clone)]
pub(crate) struct Followed {
    pub(crate) canonical: Canonical,
    /// The file's stamp when last looked at, readable or not: while it holds, nothing of
    /// the file is looked at again.
    stamp: Option<Stamp>,
    seen: Option<Version>,
}

impl Followed {
    /// Starts following `canonical` for `caller`, from what it is now.
    pub(crate) fn new(app: &App, canonical: Canonical, caller: &Caller) -> Followed {
        let mut followed = Followed {
            canonical,
            stamp: None,
            seen: None,
        };
        app.look_again(&mut followed, caller);
        followed
    }
}

impl App {
    /// Looks at `followed` again for `caller`: whether what it holds for the caller
    /// differs from when last looked at (it changed, or became readable or unreadable).
    pub(crate) fn look_again(&self, followed: &mut Followed, caller: &Caller) -> bool {
        let now = match &followed.canonical.target {
            Target::File(path) => {
                let opened = self.open_workspace_file(path);
                let stamp = opened.as_ref().map(|opened| opened.stamp);
                if stamp.is_some() && stamp == followed.stamp {
                    return false;
                }
                followed.stamp = stamp;
                opened
                    .filter(|opened| self.may_read_file(opened, caller))
                    .map(|opened| Version::File(opened.stamp))
            }
            Target::Run { run_id, .. } => {
                let store = self.registry.store();
                match store.run_revision(run_id) {
                    Ok(Some((revision, owner))) if caller.may_see(&owner) => {
                        Some(Version::Run(revision))
                    }
                    _ => None,
                }
            }
            Target::Foreign => None,
            Target::Workflow { name, .. } => self.workflows().source(name).map(|text| {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                text.hash(&mut hasher);
                Version::Workflow(hasher.finish())
            }),
        };
        let changed = now != followed.seen;
        followed.seen = now;
        changed
    }
}
