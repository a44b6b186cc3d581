//! Sub-task ids, derived from the run's id and the unit's place in the plan.
//!
//! Why derived: a sub-task then needs no row of its own to have an id (a node that has not
//! started has none), and an id leads to its unit without an index on ids. Writing a unit
//! costs one row, where a stored, indexed id cost two more B-tree writes per node.
//!
//! A sub-task id is a version 4 UUID. Its first eight bytes are the run id's, which find
//! the run. Its last eight hold (node, instance) under a keyed permutation (a Feistel
//! network) whose key is the run id's last eight bytes, which are random. So an id names
//! exactly one unit of one run, and whoever holds a sub-task id but not its run's id can
//! derive neither the run's id nor another unit's.
//!
//! Invariant: the derivation never changes; ids of stored runs must keep decoding.

use uuid::Uuid;

const HALF_BITS: u32 = 31;
const HALF_MASK: u64 = (1 << HALF_BITS) - 1;
const ROUNDS: u64 = 4;

/// The largest node index or instance number an id can carry.
pub(crate) const MAX_UNIT: usize = (HALF_MASK - 1) as usize;

/// SplitMix64's finaliser: every input bit flips about half the output bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn round(key: u64, round: u64, half: u64) -> u64 {
    mix(key ^ mix(round << 32 | half)) & HALF_MASK
}

fn key_of(run: &Uuid) -> u64 {
    let bytes = run.as_bytes();
    u64::from_be_bytes(bytes[8..].try_into().expect("eight bytes"))
}

/// The id of a unit's sub-task: the node at `index` in the plan, or its `instance`.
/// `None` if `run_id` is not a UUID.
pub(crate) fn sub_task_id(run_id: &str, index: usize, instance: Option<usize>) -> Option<String> {
    let run = Uuid::parse_str(run_id).ok()?;
    let key = key_of(&run);
    let (mut left, mut right) = (
        index.min(MAX_UNIT) as u64,
        instance.map_or(0, |k| k.min(MAX_UNIT) as u64 + 1),
    );
    for r in 0..ROUNDS {
        (left, right) = (right, left ^ round(key, r, right));
    }
    let mut bytes = *run.as_bytes();
    bytes[8..].copy_from_slice(&(left << HALF_BITS | right).to_be_bytes());
    // Sets the version (already the run's) and the variant bits, which the two spare bits
    // of the permuted half leave free.
    Some(
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string(),
    )
}

/// The start of the id of every run whose sub-task `task_id` might be: the run id's first
/// eight bytes, as text. `None` if `task_id` is not a UUID.
pub(crate) fn run_prefix(task_id: &str) -> Option<String> {
    let id = Uuid::parse_str(task_id).ok()?.hyphenated().to_string();
    Some(id[..18].to_owned())
}

/// The unit that `task_id` names if it is a sub-task of `run_id`: (node index, instance).
/// Any 62 bits decode to some unit; the caller checks that the run has it.
pub(crate) fn unit_of(run_id: &str, task_id: &str) -> Option<(usize, Option<usize>)> {
    let run = Uuid::parse_str(run_id).ok()?;
    let task = Uuid::parse_str(task_id).ok()?;
    if run.as_bytes()[..8] != task.as_bytes()[..8] || run == task {
        return None;
    }
    let key = key_of(&run);
    let packed = key_of(&task) & ((1 << (2 * HALF_BITS)) - 1);
    let (mut left, mut right) = (packed >> HALF_BITS, packed & HALF_MASK);
    for r in (0..ROUNDS).rev() {
        (left, right) = (right ^ round(key, r, left), left);
    }
    let index = usize::try_from(left).ok()?;
    let instance = match right {
        0 => None,
        k => Some(usize::try_from(k - 1).ok()?),
    };
    Some((index, instance))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "3f2b8c1e-7d4a-4b9e-9c21-5a6f0e8d7b34";

    #[test]
    fn a_sub_task_id_decodes_to_its_unit() {
        for index in [0, 1, 2, 99, 10_000, MAX_UNIT] {
            for instance in [None, Some(0), Some(1), Some(4_095), Some(MAX_UNIT)] {
                let id = sub_task_id(RUN, index, instance).unwrap();
                assert_eq!(unit_of(RUN, &id), Some((index, instance)), "{id}");
            }
        }
    }

    #[test]
    fn sub_task_ids_are_version_4_uuids_that_share_the_runs_first_half() {
        let id = sub_task_id(RUN, 7, Some(3)).unwrap();
        let parsed = Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(run_prefix(&id).unwrap(), RUN[..18]);
        assert_ne!(id[19..], RUN[19..]);
    }

    #[test]
    fn every_unit_of_a_run_has_its_own_id_and_runs_do_not_share_them() {
        let other = Uuid::new_v4().to_string();
        let mut seen = std::collections::HashSet::new();
        for run in [RUN, &other] {
            for index in 0..200 {
                assert!(seen.insert(sub_task_id(run, index, None).unwrap()));
                for k in 0..20 {
                    assert!(seen.insert(sub_task_id(run, index, Some(k)).unwrap()));
                }
            }
        }
    }

    #[test]
    fn an_id_of_another_run_or_the_run_itself_names_no_unit() {
        let other = Uuid::new_v4().to_string();
        let id = sub_task_id(&other, 3, None).unwrap();
        assert_eq!(unit_of(RUN, &id), None);
        assert_eq!(unit_of(RUN, RUN), None);
        assert_eq!(unit_of(RUN, "not-a-uuid"), None);
        assert_eq!(sub_task_id("run-1", 0, None), None);
    }

    #[test]
    fn neighbouring_units_have_unrelated_ids() {
        // The second half of neighbours' ids differs in about half its bits.
        let half = |index| {
            let id = Uuid::parse_str(&sub_task_id(RUN, index, None).unwrap()).unwrap();
            key_of(&id) & ((1 << 62) - 1)
        };
        let differing: u32 = (0..64).map(|i| (half(i) ^ half(i + 1)).count_ones()).sum();
        let mean = differing as f64 / 64.0;
        assert!((24.0..38.0).contains(&mean), "mean differing bits {mean}");
    }
}
