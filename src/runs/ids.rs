//! Sub-task ids, derived from the run's id and the unit's place in the plan.
//!
//! Why derived: a sub-task then needs no row of its own to have an id (a node that has not
//! started has none), and an id leads to its unit without an index on ids. Writing a unit
//! costs one row, where a stored, indexed id cost two more B-tree writes per node.
//!
//! A sub-task id is a version 4 UUID. Its first eight bytes are the run id's, which find
//! the run. Its last eight hold (node, instance) under a keyed permutation: a four-round
//! Feistel network whose round function is SipHash-2-4, keyed with a server secret and
//! tweaked with the whole run id. So an id names exactly one unit of one run, and whoever
//! holds a sub-task id but not the server's secret can derive neither the run's id (a
//! capability) nor another unit's. The key ([`SubTaskKey`]) is derived, under its own
//! label, from the secret the store keeps for signing `requestState`.
//!
//! Before the key, the permutation was keyed by the run id's own last eight bytes, with a
//! public mixing function, which let a sub-task id give away its run's id. Ids made that
//! way are still read ([`units_of`] tries them second), so that ids handed out before the
//! change keep naming their units; they are never made any more.
//!
//! Invariant: the derivation never changes again for a given key; ids of stored runs
//! must keep decoding.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use uuid::Uuid;

const HALF_BITS: u32 = 31;
const HALF_MASK: u64 = (1 << HALF_BITS) - 1;
const ROUNDS: u8 = 4;

/// The largest node index or instance number an id can carry.
pub(crate) const MAX_UNIT: usize = (HALF_MASK - 1) as usize;

/// The label under which the sub-task key is derived from the server's secret.
const LABEL: &[u8] = b"mcp-task-server/sub-task-ids/v1";

/// The key of the permutation: SipHash's 128 bits.
#[derive(Clone)]
pub(crate) struct SubTaskKey([u8; 16]);

impl SubTaskKey {
    /// The key derived from the server's `secret`: HMAC-SHA-256 of a label of its own, so
    /// that it is independent of every other use of the secret.
    pub(crate) fn derive(secret: &[u8]) -> SubTaskKey {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
            .expect("HMAC takes a key of any length");
        mac.update(LABEL);
        let digest = mac.finalize().into_bytes();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        SubTaskKey(key)
    }

    fn round(&self, run: &Uuid, round: u8, half: u64) -> u64 {
        let mut hasher = SipHasher24::new_with_key(&self.0);
        hasher.write(run.as_bytes());
        hasher.write_u8(round);
        hasher.write_u32(half as u32);
        hasher.finish() & HALF_MASK
    }
}

/// The unit's two halves, before the permutation.
fn halves(index: usize, instance: Option<usize>) -> (u64, u64) {
    (
        index.min(MAX_UNIT) as u64,
        instance.map_or(0, |k| k.min(MAX_UNIT) as u64 + 1),
    )
}

/// The unit of two halves, after the inverse permutation.
fn unit(left: u64, right: u64) -> Option<(usize, Option<usize>)> {
    let index = usize::try_from(left).ok()?;
    let instance = match right {
        0 => None,
        k => Some(usize::try_from(k - 1).ok()?),
    };
    Some((index, instance))
}

/// The last eight bytes of a UUID, as a number.
fn low(id: &Uuid) -> u64 {
    let bytes = id.as_bytes();
    u64::from_be_bytes(bytes[8..].try_into().expect("eight bytes"))
}

/// The id of a unit's sub-task: the node at `index` in the plan, or its `instance`.
/// `None` if `run_id` is not a UUID.
pub(crate) fn sub_task_id(
    key: &SubTaskKey,
    run_id: &str,
    index: usize,
    instance: Option<usize>,
) -> Option<String> {
    let run = Uuid::parse_str(run_id).ok()?;
    let (mut left, mut right) = halves(index, instance);
    for r in 0..ROUNDS {
        (left, right) = (right, left ^ key.round(&run, r, right));
    }
    Some(with_low_half(&run, left << HALF_BITS | right))
}

/// The run id with its last eight bytes replaced by `packed`'s 62 bits.
fn with_low_half(run: &Uuid, packed: u64) -> String {
    let mut bytes = *run.as_bytes();
    bytes[8..].copy_from_slice(&packed.to_be_bytes());
    // Sets the version (already the run's) and the variant bits, which the two spare bits
    // of the permuted half leave free.
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The start of the id of every run whose sub-task `task_id` might be: the run id's first
/// eight bytes, as text. `None` if `task_id` is not a UUID.
pub(crate) fn run_prefix(task_id: &str) -> Option<String> {
    let id = Uuid::parse_str(task_id).ok()?.hyphenated().to_string();
    Some(id[..18].to_owned())
}

/// The run and the permuted half of `task_id`, if it may be a sub-task of `run_id`.
fn packed(run_id: &str, task_id: &str) -> Option<(Uuid, u64)> {
    let run = Uuid::parse_str(run_id).ok()?;
    let task = Uuid::parse_str(task_id).ok()?;
    if run.as_bytes()[..8] != task.as_bytes()[..8] || run == task {
        return None;
    }
    Some((run, low(&task) & ((1 << (2 * HALF_BITS)) - 1)))
}

/// The unit that `task_id` names if it is a sub-task of `run_id`: (node index, instance).
/// Any 62 bits decode to some unit; the caller checks that the run has it.
pub(crate) fn unit_of(
    key: &SubTaskKey,
    run_id: &str,
    task_id: &str,
) -> Option<(usize, Option<usize>)> {
    let (run, packed) = packed(run_id, task_id)?;
    let (mut left, mut right) = (packed >> HALF_BITS, packed & HALF_MASK);
    for r in (0..ROUNDS).rev() {
        (left, right) = (right ^ key.round(&run, r, left), left);
    }
    unit(left, right)
}

/// The units `task_id` may name in `run_id`, the likelier first: as an id made with the
/// key, then as one made before the key (see the module's documentation). The caller
/// takes the first that the run has.
pub(crate) fn units_of(
    key: &SubTaskKey,
    run_id: &str,
    task_id: &str,
) -> impl Iterator<Item = (usize, Option<usize>)> {
    [
        unit_of(key, run_id, task_id),
        unkeyed::unit_of(run_id, task_id),
    ]
    .into_iter()
    .flatten()
}

/// The permutation before the key: read, never written.
mod unkeyed {
    use super::{HALF_BITS, HALF_MASK, ROUNDS, low, packed, unit};

    /// SplitMix64's finaliser.
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn round(key: u64, round: u8, half: u64) -> u64 {
        mix(key ^ mix(u64::from(round) << 32 | half)) & HALF_MASK
    }

    pub(super) fn unit_of(run_id: &str, task_id: &str) -> Option<(usize, Option<usize>)> {
        let (run, packed) = packed(run_id, task_id)?;
        let key = low(&run);
        let (mut left, mut right) = (packed >> HALF_BITS, packed & HALF_MASK);
        for r in (0..ROUNDS).rev() {
            (left, right) = (right ^ round(key, r, left), left);
        }
        unit(left, right)
    }

    /// An id as it was made before the key, for the tests of reading one.
    #[cfg(test)]
    pub(super) fn sub_task_id(run_id: &str, index: usize, instance: Option<usize>) -> String {
        let run = uuid::Uuid::parse_str(run_id).unwrap();
        let key = low(&run);
        let (mut left, mut right) = super::halves(index, instance);
        for r in 0..ROUNDS {
            (left, right) = (right, left ^ round(key, r, right));
        }
        super::with_low_half(&run, left << HALF_BITS | right)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "3f2b8c1e-7d4a-4b9e-9c21-5a6f0e8d7b34";

    fn key() -> SubTaskKey {
        SubTaskKey::derive(b"a secret of the tests, 32 bytes!")
    }

    #[test]
    fn a_sub_task_id_decodes_to_its_unit() {
        let key = key();
        for index in [0, 1, 2, 99, 10_000, MAX_UNIT] {
            for instance in [None, Some(0), Some(1), Some(4_095), Some(MAX_UNIT)] {
                let id = sub_task_id(&key, RUN, index, instance).unwrap();
                assert_eq!(unit_of(&key, RUN, &id), Some((index, instance)), "{id}");
                assert_eq!(units_of(&key, RUN, &id).next(), Some((index, instance)));
            }
        }
    }

    #[test]
    fn sub_task_ids_are_version_4_uuids_that_share_the_runs_first_half() {
        let id = sub_task_id(&key(), RUN, 7, Some(3)).unwrap();
        let parsed = Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(run_prefix(&id).unwrap(), RUN[..18]);
        assert_ne!(id[19..], RUN[19..]);
    }

    #[test]
    fn every_unit_of_a_run_has_its_own_id_and_runs_do_not_share_them() {
        let key = key();
        let other = Uuid::new_v4().to_string();
        let mut seen = std::collections::HashSet::new();
        for run in [RUN, &other] {
            for index in 0..200 {
                assert!(seen.insert(sub_task_id(&key, run, index, None).unwrap()));
                for k in 0..20 {
                    assert!(seen.insert(sub_task_id(&key, run, index, Some(k)).unwrap()));
                }
            }
        }
    }

    #[test]
    fn an_id_of_another_run_or_the_run_itself_names_no_unit() {
        let key = key();
        let other = Uuid::new_v4().to_string();
        let id = sub_task_id(&key, &other, 3, None).unwrap();
        assert_eq!(unit_of(&key, RUN, &id), None);
        assert_eq!(units_of(&key, RUN, &id).count(), 0);
        assert_eq!(unit_of(&key, RUN, RUN), None);
        assert_eq!(unit_of(&key, RUN, "not-a-uuid"), None);
        assert_eq!(sub_task_id(&key, "run-1", 0, None), None);
    }

    #[test]
    fn neighbouring_units_have_unrelated_ids() {
        // The second half of neighbours' ids differs in about half its bits.
        let key = key();
        let half = |index| {
            let id = Uuid::parse_str(&sub_task_id(&key, RUN, index, None).unwrap()).unwrap();
            low(&id) & ((1 << 62) - 1)
        };
        let differing: u32 = (0..64).map(|i| (half(i) ^ half(i + 1)).count_ones()).sum();
        let mean = differing as f64 / 64.0;
        assert!((24.0..38.0).contains(&mean), "mean differing bits {mean}");
    }

    #[test]
    fn without_the_servers_secret_a_sub_task_id_does_not_lead_to_its_run() {
        // Two servers with different secrets give the same unit of the same run
        // different ids, and neither decodes the other's: the id is a function of the
        // secret, not of the run id alone, which is all an outsider could try keys from.
        let (ours, theirs) = (key(), SubTaskKey::derive(b"another server's secret"));
        for (index, instance) in [(0, None), (1, None), (5, Some(2))] {
            let id = sub_task_id(&ours, RUN, index, instance).unwrap();
            let other = sub_task_id(&theirs, RUN, index, instance).unwrap();
            assert_ne!(id, other);
            assert_eq!(unit_of(&ours, RUN, &id), Some((index, instance)));
            assert_ne!(unit_of(&theirs, RUN, &id), Some((index, instance)));
            // Nor is it the id the run id alone used to give, from which the run's last
            // eight bytes could be searched for.
            assert_ne!(id, unkeyed::sub_task_id(RUN, index, instance));
        }
        // The key is the secret's under a label, not the secret itself.
        assert_ne!(&ours.0[..], &b"a secret of the tests, 32 bytes!"[..16]);
    }

    #[test]
    fn an_id_made_before_the_key_still_names_its_unit() {
        let key = key();
        for (index, instance) in [(0, None), (3, None), (2, Some(7))] {
            let old = unkeyed::sub_task_id(RUN, index, instance);
            let units: Vec<_> = units_of(&key, RUN, &old).collect();
            assert_eq!(units.len(), 2, "the keyed reading first, then the old one");
            assert_eq!(units[1], (index, instance), "{old}");
        }
    }
}
