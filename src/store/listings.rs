//! Runs and audit rows as listings show them (the dashboard, resource completion): runs
//! filtered by status, workflow and text, a page at a time, with what a row shows (its
//! task's state, its node count, when it ended), and the audit log by principal.

use super::runs::scope_clause;
use super::sql::from_columns;
use super::{Scope, Store, StoreError};

/// Which runs a page of the list shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunQuery<'a> {
    /// Only runs of this status (`running`, `succeeded`, `failed`, `cancelled`).
    pub status: Option<&'a str>,
    /// Only runs of this workflow.
    pub workflow: Option<&'a str>,
    /// Only runs whose id, workflow or status message holds this text, in any case.
    pub text: Option<&'a str>,
    /// Only runs older than this run (the last one of the page before).
    pub before: Option<&'a str>,
    /// At most this many.
    pub limit: usize,
}

/// A run as a row of the dashboard's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRun {
    pub id: String,
    pub workflow: String,
    pub status: String,
    /// Its task's state: `input_required` while it waits on an answer.
    pub task_status: Option<String>,
    pub progress: i64,
    pub status_message: Option<String>,
    /// How many nodes its plan has.
    pub nodes: i64,
    pub created_at: String,
    pub finished_at: Option<String>,
}

impl Store {
    /// A page of the runs in `scope` that `query` names, newest first.
    pub fn listed_runs(
        &self,
        query: &RunQuery<'_>,
        scope: Scope<'_>,
    ) -> Result<Vec<ListedRun>, StoreError> {
        let sql = format!(
            "SELECT r.id, r.workflow, r.status, t.status, COALESCE(t.progress, 0),
                    t.status_message, p.nodes, r.created_at, r.finished_at
             FROM runs r JOIN plans p ON p.key = r.plan_key
             LEFT JOIN run_tasks t ON t.run_key = r.key
             WHERE (CAST(?1 AS TEXT) IS NULL OR r.status = ?1)
               AND (CAST(?2 AS TEXT) IS NULL OR r.workflow = ?2)
               AND (CAST(?3 AS TEXT) IS NULL
                    OR LOWER(r.id) LIKE ?3 ESCAPE '\\'
                    OR LOWER(r.workflow) LIKE ?3 ESCAPE '\\'
                    OR LOWER(COALESCE(t.status_message, '')) LIKE ?3 ESCAPE '\\')
               AND (CAST(?4 AS TEXT) IS NULL
                    OR (r.created_at, r.key) < (SELECT b.created_at, b.key FROM runs b WHERE b.id = ?4))
               AND {}
             ORDER BY r.created_at DESC, r.key DESC LIMIT ?5",
            scope_clause(6, 7)
        );
        let text = query
            .text
            .map(|text| format!("%{}%", like_escaped(&text.to_lowercase())));
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let (kind, name) = scope.params();
        let params: [&dyn super::sql::Param; 7] = [
            &query.status,
            &query.workflow,
            &text,
            &query.before,
            &limit,
            &kind,
            &name,
        ];
        self.with(|tx| {
            tx.db.query(&sql, &params, |r| {
                Ok(from_columns!(
                    r,
                    ListedRun {
                        id,
                        workflow,
                        status,
                        task_status,
                        progress,
                        status_message,
                        nodes,
                        created_at,
                        finished_at,
                    }
                ))
            })
        })
    }

    /// The names of the workflows that runs in `scope` ran, for the list's filter.
    pub fn listed_workflows(&self, scope: Scope<'_>) -> Result<Vec<String>, StoreError> {
        let sql = format!(
            "SELECT DISTINCT r.workflow FROM runs r WHERE {} ORDER BY r.workflow LIMIT 500",
            scope_clause(1, 2)
        );
        let (kind, name) = scope.params();
        self.with(|tx| tx.db.query(&sql, &[&kind, &name], |r| r.get(0)))
    }
}

/// `text` with LIKE's wildcards and its escape character taken literally.
fn like_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Which rows a page of the audit log shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditQuery<'a> {
    pub tool: Option<&'a str>,
    /// `ok`, `rejected`, `not_found` or `error`.
    pub outcome: Option<&'a str>,
    /// Only the calls of this principal.
    pub principal: Option<&'a str>,
    pub run_id: Option<&'a str>,
    /// Only rows older than this one (the last of the page before).
    pub before: Option<i64>,
    pub limit: usize,
}

impl Store {
    /// A page of the audit log, newest first. With `only_unnamed`, only the rows of calls
    /// made for no principal.
    pub fn listed_audit(
        &self,
        query: &AuditQuery<'_>,
        only_unnamed: bool,
    ) -> Result<Vec<super::AuditRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM audit_log
             WHERE (CAST(?1 AS TEXT) IS NULL OR tool = ?1)
               AND (CAST(?2 AS TEXT) IS NULL OR outcome = ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR principal = ?3)
               AND (CAST(?4 AS TEXT) IS NULL OR run_id = ?4)
               AND (CAST(?5 AS BIGINT) IS NULL OR id < ?5)
               AND (CAST(?6 AS BIGINT) = 0 OR principal IS NULL)
             ORDER BY id DESC LIMIT ?7",
            super::audit::COLUMNS
        );
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let unnamed = i64::from(only_unnamed);
        let params: [&dyn super::sql::Param; 7] = [
            &query.tool,
            &query.outcome,
            &query.principal,
            &query.run_id,
            &query.before,
            &unnamed,
            &limit,
        ];
        self.with(|tx| tx.db.query(&sql, &params, super::audit::read_row))
    }
}
