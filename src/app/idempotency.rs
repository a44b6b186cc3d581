//! Idempotent starts: a workflow call may carry an `idempotency_key`. A retried call with
//! the same key and the same arguments gets the run the first call started, never a
//! second one; the same key with other arguments is refused.
//!
//! The key and the call, as canonical JSON, are recorded with the run, under a unique
//! index on principal and key, so that a retry after a restart, or through another
//! process, finds it too, and a key is its principal's own: another principal's call with
//! it neither finds the run nor is refused because of it.

use serde_json::{Map, Value, json};

use super::envelope::{self, Envelope};
use super::{App, Caller};
use crate::store::AuditOutcome;
use crate::todos::ToolError;

pub(crate) const IDEMPOTENCY_KEY: &str = "idempotency_key";

/// The longest key taken.
const MAX_KEY: usize = 200;

/// A call that may be retried: its key, and the call as canonical JSON.
#[derive(Debug, Clone)]
pub(crate) struct Retryable {
    pub key: String,
    pub call: String,
    /// The principal the call is made for: part of the call, so that one principal's key
    /// never finds another's run.
    pub principal: Option<String>,
}

/// `value` with every object's keys in sorted order: the same arguments, however ordered,
/// read as the same call.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The JSON Schema of the key, for the tools that take it.
pub(crate) fn key_schema() -> Value {
    json!({
        "type": "string", "minLength": 1, "maxLength": MAX_KEY,
        "description": "Makes the call safe to retry: a call with the same key and the same \
                        arguments returns the run the first one started."
    })
}

impl App {
    /// Takes the key out of a workflow call's arguments. A key that is not a string of 1
    /// to 200 characters rejects the call (audited); the envelope is its answer.
    pub(crate) fn take_idempotency_key(
        &self,
        tool: &str,
        args: &mut Map<String, Value>,
        caller: &Caller,
    ) -> Result<Option<Retryable>, Envelope> {
        let Some(value) = args.get(IDEMPOTENCY_KEY) else {
            return Ok(None);
        };
        let key = value
            .as_str()
            .filter(|key| (1..=MAX_KEY).contains(&key.chars().count()))
            .map(str::to_owned);
        let Some(key) = key else {
            let error = ToolError::invalid_input(format!(
                "{IDEMPOTENCY_KEY}: must be a string of 1 to {MAX_KEY} characters"
            ));
            return Err(self.refuse((tool, args), &error, caller));
        };
        args.remove(IDEMPOTENCY_KEY);
        let principal = caller.principal();
        let mut call =
            json!({ "tool": tool, "arguments": canonical(&Value::Object(args.clone())) });
        if let Some(principal) = principal {
            call["principal"] = json!(principal);
        }
        Ok(Some(Retryable {
            key,
            call: call.to_string(),
            principal: principal.map(str::to_owned),
        }))
    }

    /// The run an earlier call with the same key started, if any (its call audited). The
    /// same key with other arguments rejects the call (audited).
    pub(crate) fn earlier_run(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        retryable: &Retryable,
        caller: &Caller,
    ) -> Result<Option<String>, Envelope> {
        let found = self
            .registry
            .run_by_idempotency_key(retryable.principal.as_deref(), &retryable.key)
            .map_err(|_| envelope::of_error(&ToolError::internal()))?;
        match found {
            None => Ok(None),
            Some((run_id, call)) if call == retryable.call => {
                self.audit((tool, args), AuditOutcome::Ok, Some(&run_id), caller);
                Ok(Some(run_id))
            }
            Some(_) => {
                let error = ToolError::invalid_input(format!(
                    "{IDEMPOTENCY_KEY}: this key was used for a call with other arguments"
                ));
                Err(self.refuse((tool, args), &error, caller))
            }
        }
    }
}
