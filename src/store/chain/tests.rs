//! The chain's walk against any log and any single mutation of it.

use proptest::prelude::*;

use super::*;

/// Rows as `append_audit` writes them, chained from the start.
fn chained(rows: &[(String, String, Option<String>)]) -> Vec<AuditRow> {
    let mut prev = GENESIS.to_owned();
    let mut out = Vec::new();
    for (index, (tool, args, principal)) in rows.iter().enumerate() {
        let id = index as i64 + 1;
        let args_sha256 = sha256_hex(args.as_bytes());
        let at = format!("2026-01-01T00:00:{:02}Z", index % 60);
        let fields = Fields {
            id,
            at: &at,
            tool,
            args,
            args_sha256: &args_sha256,
            outcome: "ok",
            run_id: None,
            node_id: None,
            principal: principal.as_deref(),
        };
        let hash = chain_hash(&prev, &fields);
        out.push(AuditRow {
            id,
            at,
            tool: tool.clone(),
            args: args.clone(),
            outcome: "ok".into(),
            run_id: None,
            node_id: None,
            principal: principal.clone(),
            args_sha256: Some(args_sha256),
            prev_hash: Some(prev.clone()),
            hash: Some(hash.clone()),
        });
        prev = hash;
    }
    out
}

fn walk(rows: &[AuditRow]) -> Result<Intact, Break> {
    let mut walk = Walk::new(0);
    for row in rows {
        walk.step(row)?;
    }
    Ok(walk.finish())
}

fn rows() -> impl Strategy<Value = Vec<(String, String, Option<String>)>> {
    prop::collection::vec(
        ("[a-z_]{1,12}", "\\PC{0,40}", prop::option::of("[a-z]{1,6}")),
        2..24,
    )
}

#[derive(Debug, Clone)]
enum Mutation {
    /// A field of row `at` edited.
    Edit {
        at: usize,
        field: u8,
    },
    Delete {
        at: usize,
    },
    /// A well-formed row, chained to the row before `at`, inserted before it.
    Insert {
        at: usize,
    },
    /// Rows `at` and `at + 1` exchanged (their ids too, so they stay in id order).
    Swap {
        at: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..6).prop_map(|(at, field)| Mutation::Edit { at, field }),
        any::<usize>().prop_map(|at| Mutation::Delete { at }),
        any::<usize>().prop_map(|at| Mutation::Insert { at }),
        any::<usize>().prop_map(|at| Mutation::Swap { at }),
    ]
}

/// Applies `mutation` and returns the id of the row the walk must name, or `None` when the
/// mutation cannot be seen without an anchor kept elsewhere (the last row deleted).
fn apply(rows: &mut Vec<AuditRow>, mutation: &Mutation) -> Option<i64> {
    let len = rows.len();
    match *mutation {
        Mutation::Edit { at, field } => {
            let row = &mut rows[at % len];
            match field {
                0 => row.tool.push('x'),
                1 => row.args.push(' '),
                2 => row.outcome = "error".into(),
                3 => row.at.push('0'),
                4 => {
                    row.principal = Some(format!("{}!", row.principal.clone().unwrap_or_default()))
                }
                _ => row.node_id = Some("n".into()),
            }
            Some((at % len) as i64 + 1)
        }
        Mutation::Delete { at } => {
            let at = at % len;
            rows.remove(at);
            (at + 1 < len).then_some(at as i64 + 1)
        }
        Mutation::Insert { at } => {
            // A forged row, well formed and chained to the row before, under an id one
            // past that row's: every row after it is renumbered to stay in order.
            let at = at % len;
            let prev = if at == 0 {
                GENESIS.to_owned()
            } else {
                rows[at - 1].hash.clone().unwrap()
            };
            let mut forged = rows[at].clone();
            forged.tool = "forged".into();
            forged.prev_hash = Some(prev.clone());
            forged.hash = Some(chain_hash(&prev, &Fields::of(&forged).unwrap()));
            rows.insert(at, forged);
            for row in &mut rows[at + 1..] {
                row.id += 1;
            }
            Some(at as i64 + 2)
        }
        Mutation::Swap { at } => {
            let at = at % (len - 1);
            let (a, b) = (rows[at].id, rows[at + 1].id);
            rows.swap(at, at + 1);
            rows[at].id = a;
            rows[at + 1].id = b;
            Some(a)
        }
    }
}

proptest! {
    #[test]
    fn any_appended_log_verifies(rows in rows()) {
        let log = chained(&rows);
        let intact = walk(&log).expect("an untouched log verifies");
        prop_assert_eq!(intact.checked, log.len() as u64);
        prop_assert_eq!(intact.head, Some((log.len() as i64, log.last().unwrap().hash.clone().unwrap())));
    }

    #[test]
    fn any_single_mutation_is_named_at_its_row(rows in rows(), mutation in mutation()) {
        let mut log = chained(&rows);
        let expected = apply(&mut log, &mutation);
        let verdict = walk(&log);
        match expected {
            Some(row) => {
                let broken = verdict.expect_err("a mutated log fails");
                prop_assert_eq!(broken.row(), row, "{:?}: {}", mutation, broken);
            }
            None => prop_assert!(verdict.is_ok()),
        }
    }
}

#[test]
fn a_deleted_row_is_named_as_removed() {
    let mut log = chained(&[
        ("a".into(), "{}".into(), None),
        ("b".into(), "{}".into(), None),
        ("c".into(), "{}".into(), None),
    ]);
    log.remove(1);
    let broken = walk(&log).unwrap_err();
    assert_eq!(broken, Break::Removed { first: 2, row: 3 });
    assert_eq!(
        broken.to_string(),
        "row 2 was removed: row 3 chains to a row that is not there"
    );
}

#[test]
fn rows_before_the_chain_began_are_counted_apart() {
    let mut unchained = chained(&[("old".into(), "{}".into(), None)]);
    unchained[0].hash = None;
    unchained[0].prev_hash = None;
    unchained[0].args_sha256 = None;
    let mut log = unchained;
    let mut next = chained(&[("new".into(), "{}".into(), None)]);
    // Rewrite the new row as appended after the unchained one: id 2, chain from genesis.
    next[0].id = 2;
    next[0].hash = Some(chain_hash(GENESIS, &Fields::of(&next[0]).unwrap()));
    log.extend(next);
    let mut walk = Walk::new(1);
    for row in &log {
        walk.step(row).unwrap();
    }
    let intact = walk.finish();
    assert_eq!((intact.checked, intact.unchained), (1, 1));
    assert!(
        intact
            .to_string()
            .contains("1 earlier rows predate the chain")
    );
}

/// The hash of one row is fixed by the encoding `chain.rs` describes: logs written by any
/// build must verify under every later one. The expected digests were computed apart from
/// this code (Python's `hashlib` over the encoding as documented); a change to the
/// encoding fails here.
#[test]
fn a_rows_hash_is_the_documented_encoding() {
    let fields = Fields {
        id: 7,
        at: "2026-12-05T08:00:00.000Z",
        tool: "add_task",
        args: r#"{"title":"Ship"}"#,
        args_sha256: &sha256_hex(br#"{"title":"Ship"}"#),
        outcome: "ok",
        run_id: Some("r1"),
        node_id: None,
        principal: Some("alice"),
    };
    assert_eq!(
        fields.args_sha256,
        "cf2e93b7da3e02bed4046ed3095045e9a6d5a7c24e204e61cbf5595c8c11a076"
    );
    assert_eq!(
        chain_hash(GENESIS, &fields),
        "a29d3505bf276909683c58d1b2e3780f45779fa1bab74195ee1a537232af9b49"
    );
}
