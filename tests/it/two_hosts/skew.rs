//! Clock skew: leases run on the database's clock, so a host whose own clock runs 30 s
//! ahead (`TASKS_CLOCK_OFFSET_MS`, the clock's test hook) finds no lease of a live host
//! run out, and takes none of its runs.

use std::process::Stdio;
use std::time::Duration;

use mcp_task_server::store::{Durability, Scope, Scratch, Store};

use super::{give, input_n, job, job_titles, owner_prefix, serve, statuses, stop, workspace};
use crate::support::{sorted_titles, wait_until_within};

const RUNS: u64 = 3;

#[test]
fn a_host_whose_clock_runs_30_s_ahead_takes_no_live_run_from_another() {
    let Some(scratch) = Scratch::postgres("two_hosts_skew") else {
        return;
    };
    // A wait through several rounds of the other host's housekeeping.
    let dir = workspace(&[("long_job", &job("long_job", "4s", false))]);
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    // A lease of 3 s, renewed every second: long enough that a live host never lets one
    // run out on a busy machine, far shorter than the skew.
    let lease = ["--lease", "3s"];
    let mut a = serve(
        dir.path(),
        scratch.url(),
        &lease,
        &[],
        Stdio::null(),
        Stdio::null(),
    );
    let ahead = [("TASKS_CLOCK_OFFSET_MS", "30000")];
    let mut b = serve(
        dir.path(),
        scratch.url(),
        &lease,
        &ahead,
        Stdio::null(),
        Stdio::null(),
    );
    give(&mut a, "long_job", 0..RUNS);
    give(&mut b, "long_job", RUNS..2 * RUNS);
    let all = (2 * RUNS) as usize;
    wait_until_within(
        "every run has made its first todo",
        Duration::from_secs(20),
        || store.list_todos(&Default::default()).unwrap().len() >= all,
    );

    let (a_owner, b_owner) = (owner_prefix(&a), owner_prefix(&b));
    wait_until_within("every run has succeeded", Duration::from_secs(30), || {
        for summary in store
            .list_runs(Some("running"), Scope::Everyone, 100)
            .unwrap()
        {
            let Some(run) = store.run(&summary.id).unwrap() else {
                continue;
            };
            let given = match input_n(&store, &run.id) < RUNS {
                true => &a_owner,
                false => &b_owner,
            };
            if let Some(owner) = run.lease_owner.filter(|_| run.status == "running") {
                assert!(
                    owner.starts_with(given.as_str()),
                    "run {} of the host {given} is held by {owner}, taken from a live host",
                    run.id
                );
            }
        }
        statuses(&store).iter().all(|s| s == "succeeded")
    });
    stop(a);
    stop(b);
    assert_eq!(statuses(&store).len(), all);
    assert_eq!(
        sorted_titles(&store),
        job_titles(0..2 * RUNS),
        "every todo exactly once"
    );
}
